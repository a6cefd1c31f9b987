#include "dist/sharding.h"

#include <utility>

namespace lt::dist {
namespace {

const std::vector<std::pair<std::string, Sharding>>& spellings() {
  static const std::vector<std::pair<std::string, Sharding>> table = {
      {"none", Sharding::None},           {"ddp", Sharding::Ddp},          {"zero1", Sharding::Zero1},
      {"zero2", Sharding::Zero2},         {"zero3", Sharding::Zero3},      {"no_shard", Sharding::Ddp},
      {"shard_grad_op", Sharding::Zero2}, {"full_shard", Sharding::Zero3},
  };
  return table;
}

}  // namespace

std::string_view sharding_name(Sharding s) {
  for (const auto& [name, value] : spellings())
    if (value == s) return name;  // the canonical names come first
  return "none";
}

std::optional<Sharding> parse_sharding(std::string_view name) {
  for (const auto& [spelling, value] : spellings())
    if (spelling == name) return value;
  return std::nullopt;
}

const std::vector<std::string>& sharding_spellings() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& entry : spellings()) out.push_back(entry.first);
    return out;
  }();
  return names;
}

}  // namespace lt::dist

#include "core/enum_names.h"

#include <algorithm>

#include "core/error.h"

namespace lt {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_name(std::string_view text, const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  size_t best_d = SIZE_MAX;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(text, c);
    if (d < best_d) best_d = d, best = &c;
  }
  return best && best_d <= std::max<size_t>(2, text.size() / 3) ? *best : std::string();
}

void fail_unknown_name(std::string_view where, std::string_view text, const std::vector<std::string>& names) {
  const std::string near = text.empty() ? std::string() : closest_name(text, names);
  LT_FAIL("{} is '{}', expected one of {}{}", where, text, fmt::join(names, ", "),
          near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near));
}

}  // namespace lt

#include "cli/option_hint.h"

#include <fmt/format.h>

#include "core/enum_names.h"

namespace lt::cli {

std::string unknown_option_message(const CLI::App& app, int argc, const char* const* argv) {
  const CLI::App* sub = nullptr;
  int first = 1;
  for (; first < argc && !sub; ++first)
    for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; }))
      if (s->get_name() == argv[first]) sub = s;
  if (!sub) return "";
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (!arg.starts_with("--") || arg.size() == 2) continue;
    const std::string name = arg.substr(0, arg.find('='));
    if (sub->get_option_no_throw(name) || app.get_option_no_throw(name)) continue;
    std::vector<std::string> known;
    for (const CLI::Option* o : sub->get_options())
      for (const std::string& l : o->get_lnames()) known.push_back("--" + l);
    if (const std::string near = closest_name(name, known); !near.empty())
      return fmt::format("{}: unknown option '{}'; did you mean '{}'?", sub->get_name(), name, near);
    return fmt::format("{}: unknown option '{}' (`leantune {} --help` lists the options)", sub->get_name(),
                       name, sub->get_name());
  }
  return "";
}

}  // namespace lt::cli

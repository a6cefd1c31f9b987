// A directory tree as path -> what is there (kind, size and content hash; a link's target), to prove that a
// command left a user's files byte-identical.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace lt::test {

using TreeSnapshot = std::map<std::string, std::string>;

// FNV-1a over the file's bytes: a changed byte changes it (a test helper, not a security check).
inline uint64_t file_digest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t h = 0xcbf29ce484222325ull;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) h = (h ^ uint8_t(buffer[i])) * 0x100000001b3ull;
    if (!in) break;
  }
  return h;
}

// Every entry under `root` (links are recorded, not followed), keyed by its path relative to root.
inline TreeSnapshot snapshot_tree(const std::string& root) {
  namespace fs = std::filesystem;
  TreeSnapshot out;
  for (fs::recursive_directory_iterator it(root), end; it != end; ++it) {
    const std::string rel = it->path().lexically_relative(root).string();
    const fs::file_status st = it->symlink_status();
    if (fs::is_symlink(st))
      out[rel] = "link -> " + fs::read_symlink(it->path()).string();
    else if (fs::is_directory(st))
      out[rel] = "dir";
    else if (fs::is_regular_file(st))
      out[rel] =
          fmt::format("file {} bytes {:016x}", fs::file_size(it->path()), file_digest(it->path().string()));
    else
      out[rel] = "other";
  }
  return out;
}

// The entries of `before` that `after` lacks or holds differently, and (unless only_lost) those it adds;
// empty when the trees agree.
inline std::string tree_changes(const TreeSnapshot& before, const TreeSnapshot& after,
                                bool only_lost = false) {
  std::string out;
  for (const auto& [path, what] : before) {
    auto it = after.find(path);
    if (it == after.end())
      out += fmt::format("gone: {} ({})\n", path, what);
    else if (it->second != what)
      out += fmt::format("changed: {} ({} -> {})\n", path, what, it->second);
  }
  if (!only_lost)
    for (const auto& [path, what] : after)
      if (!before.count(path)) out += fmt::format("new: {} ({})\n", path, what);
  return out;
}

}  // namespace lt::test

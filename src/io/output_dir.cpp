#include "io/output_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/atomic_file.h"

namespace lt::io {

namespace fs = std::filesystem;

namespace {

bool is_link(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

bool all_chars(std::string_view s, int (*pred)(int)) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [pred](char c) { return pred((unsigned char)c) != 0; });
}

// The absolute path with links resolved as far as it exists, without a trailing separator: inputs and
// output are compared on these.
fs::path resolved(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
  if (ec) p = fs::absolute(path).lexically_normal();
  if (!p.has_filename() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  return p;
}

// Whether `inner` is `outer` or lies under it.
bool within(const fs::path& inner, const fs::path& outer) {
  auto [o, i] = std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
  return o == outer.end();
}

void check_apart_from_inputs(const std::string& output, const OutputDirOptions& o) {
  const fs::path out = resolved(output);
  for (const OutputInput& input : o.inputs) {
    if (input.path.empty()) continue;
    const fs::path in = resolved(input.path);
    const char* relation = out == in         ? "is"
                           : within(out, in) ? "is inside"
                           : within(in, out) ? "contains"
                                             : nullptr;
    LT_CHECK(relation == nullptr,
             "{} is '{}', which {} the input {} {} '{}'; leantune never writes where its inputs are: choose "
             "a directory of its own",
             o.who, output, relation, fs::is_directory(in) ? "directory" : "file", input.key, input.path);
  }
}

// The files a previous run published into `dir`, as its marker records them (none when unreadable).
std::vector<std::string> published_files(const std::string& dir) {
  std::ifstream in(fs::path(dir) / kOwnerMarker, std::ios::binary);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> out;
  if (!j.is_object() || !j.contains("published") || !j["published"].is_array()) return out;
  for (const nlohmann::json& entry : j["published"]) {
    if (!entry.is_string()) continue;
    std::string name = entry.get<std::string>();
    if (!name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos)
      out.push_back(std::move(name));
  }
  return out;
}

}  // namespace

void write_owner_marker(const std::string& dir, const std::vector<std::string>& published) {
  nlohmann::json j = {{"created_by", "leantune"}};
  if (!published.empty()) j["published"] = published;
  write_file_atomic((fs::path(dir) / kOwnerMarker).string(), j.dump() + "\n");
}

bool has_owner_marker(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  const std::string marker = (fs::path(dir) / kOwnerMarker).string();
  return ::lstat(marker.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void refuse_symlink(const std::string& path, std::string_view who) {
  LT_CHECK(
      !is_link(path),
      "{}: {} is a symbolic link; leantune never writes through links (it would change the file the link "
      "points to): remove the link or choose another output directory",
      who, path);
}

bool is_staging_name(const std::string& name) {
  std::string stem = name;
  bool suffixed = false;
  for (;;) {
    const size_t dot = stem.rfind('.');
    if (dot == std::string::npos || dot == 0) break;
    const std::string_view suffix = std::string_view(stem).substr(dot + 1);
    const size_t dash = suffix.find('-');
    if (dash == std::string_view::npos) break;
    const std::string_view kind = suffix.substr(0, dash), hex = suffix.substr(dash + 1);
    if ((kind != "tmp" && kind != "old" && kind != "deleting") || hex.size() > 16 ||
        !all_chars(hex, ::isxdigit))
      break;
    stem.resize(dot);
    suffixed = true;
  }
  const std::string checkpoint = "checkpoint-", staging = ".leantune-staging-";
  if (stem.rfind(checkpoint, 0) == 0) return suffixed && all_chars(stem.substr(checkpoint.size()), ::isdigit);
  return stem.rfind(staging, 0) == 0 && all_chars(stem.substr(staging.size()), ::isxdigit);
}

void remove_owned_directory(const std::string& dir,
                            const std::function<void(const std::string& doomed)>& between) {
  LT_CHECK(has_owner_marker(dir), "refusing to delete {}: leantune did not create it (no {} marker in it)",
           dir, kOwnerMarker);
  const std::string doomed = dir + ".deleting-" + unique_name_suffix();
  LT_CHECK(::rename(dir.c_str(), doomed.c_str()) == 0, "cannot rename {} to {} (to delete it): {}", dir,
           doomed, std::strerror(errno));
  const std::string parent = fs::path(doomed).parent_path().string();
  fsync_directory(parent.empty() ? "." : parent);
  if (between) between(doomed);
  std::error_code ec;
  fs::remove_all(doomed, ec);
  LT_CHECK(!ec, "cannot delete {} (was {}): {}", doomed, dir, ec.message());
}

namespace {

// What a claim finds at `path` (after the refusals).
enum class Found { nothing, owned, claimable };

Found inspect(const std::string& path, const OutputDirOptions& o) {
  LT_CHECK(!path.empty(), "{} is empty, expected a directory", o.who);
  check_apart_from_inputs(path, o);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    LT_CHECK(errno == ENOENT, "{}: cannot read '{}': {}", o.who, path, std::strerror(errno));
    return Found::nothing;
  }
  LT_CHECK(!S_ISLNK(st.st_mode),
           "{} is '{}', which is a symbolic link; leantune never writes through links: name the directory it "
           "points to",
           o.who, path);
  LT_CHECK(S_ISDIR(st.st_mode), "{} is '{}', which is not a directory", o.who, path);
  bool empty = true;
  for (const fs::directory_entry& entry : fs::directory_iterator(path)) {
    empty = false;
    refuse_symlink(entry.path().string(), o.who);
  }
  if (has_owner_marker(path)) return Found::owned;
  LT_CHECK(empty || o.overwrite,
           "{} is '{}', which holds files leantune did not write (no {} marker there); choose a new or empty "
           "directory, or set overwrite_output_dir to write into it (even then leantune deletes nothing it "
           "did not write)",
           o.who, path, kOwnerMarker);
  return Found::claimable;
}

}  // namespace

void OutputDir::check(const std::string& path, const OutputDirOptions& options) {
  inspect(path, options);
}

OutputDir::OutputDir(std::string path, const OutputDirOptions& o) : path_(std::move(path)) {
  const Found found = inspect(path_, o);
  if (found == Found::nothing) {
    std::error_code ec;
    fs::create_directories(path_, ec);
    LT_CHECK(!ec, "{}: cannot create '{}': {}", o.who, path_, ec.message());
  }
  if (found != Found::owned) write_owner_marker(path_);

  // The lock is on the directory itself: the marker is rewritten (renamed over) as files are published.
  lock_fd_ = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  LT_CHECK(lock_fd_ >= 0, "{}: cannot open {}: {}", o.who, path_, std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(lock_fd_);
    lock_fd_ = -1;
    LT_CHECK(err != EWOULDBLOCK, "{} is '{}', which another leantune run is using (it holds the lock on it)",
             o.who, path_);
    LT_FAIL("{}: cannot lock {}: {}", o.who, path_, std::strerror(err));
  }
  published_ = published_files(path_);

  // Staging directories of interrupted runs: leantune's names and its marker (or nothing at all, when the
  // run stopped between creating one and marking it). The lock says no live run is writing them.
  for (const fs::directory_entry& entry : fs::directory_iterator(path_)) {
    const std::string p = entry.path().string();
    if (!is_staging_name(entry.path().filename().string()) || !entry.is_directory() || is_link(p)) continue;
    std::error_code ec;
    if (!has_owner_marker(p) && !fs::is_empty(p, ec)) continue;
    fs::remove_all(p, ec);
    LT_CHECK(!ec, "{}: cannot remove the stale staging directory {}: {}", o.who, p, ec.message());
  }
}

OutputDir::~OutputDir() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

std::string OutputDir::make_staging() const {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string dir =
        (fs::path(path_) / (std::string(".leantune-staging-") + unique_name_suffix())).string();
    if (::mkdir(dir.c_str(), 0777) == 0) {
      write_owner_marker(dir);
      return dir;
    }
    LT_CHECK(errno == EEXIST, "cannot create the staging directory {}: {}", dir, std::strerror(errno));
  }
  LT_FAIL("cannot create a staging directory in {}: every name tried exists", path_);
}

void OutputDir::publish(const std::string& staging, const std::vector<std::string>& names,
                        const std::function<bool(const std::string&)>& superseded) {
  for (const std::string& name : names) {
    LT_CHECK(name.find('/') == std::string::npos, "publishing {}: '{}' is not a file name", path_, name);
    refuse_symlink((fs::path(path_) / name).string(), "writing the output directory");
  }
  for (const std::string& name : names) {
    const std::string from = (fs::path(staging) / name).string(), to = (fs::path(path_) / name).string();
    LT_CHECK(::rename(from.c_str(), to.c_str()) == 0, "cannot move {} to {}: {}", from, to,
             std::strerror(errno));
  }
  // Files an earlier run published that this set replaces (another shard count): leantune's by record.
  std::vector<std::string> kept;
  for (const std::string& old : published_) {
    if (std::find(names.begin(), names.end(), old) != names.end()) continue;
    const std::string p = (fs::path(path_) / old).string();
    struct stat st {};
    if (superseded && superseded(old) && ::lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      LT_CHECK(::unlink(p.c_str()) == 0, "cannot remove {} (an earlier save's, replaced now): {}", p,
               std::strerror(errno));
      continue;
    }
    kept.push_back(old);
  }
  kept.insert(kept.end(), names.begin(), names.end());
  published_ = kept;
  write_owner_marker(path_, published_);
  fsync_directory(path_);
  remove_owned_directory(staging);
}

}  // namespace lt::io

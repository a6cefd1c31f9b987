// The ownership rule for everything leantune writes (docs/TRAINING.md, "Output directory"), in one place:
//   - it writes only into an output directory that is new, empty, or one it created before (it holds the
//     marker file `.leantune`); --overwrite_output_dir claims a directory with other files in it, and
//     still nothing there is deleted that leantune did not write;
//   - it deletes only directories it created: they carry the same marker (checkpoints, staging);
//   - it never writes through a symbolic link (a link in the output directory is refused by name);
//   - the output directory may not be, be inside, or contain any input (base model, adapter, data);
//   - one run at a time: the directory is locked (flock) for as long as the run holds it.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace lt::io {

inline constexpr const char* kOwnerMarker = ".leantune";

// Writes the marker into `dir`: leantune created it, and may replace or delete it. `published`: the files
// leantune has moved into it (OutputDir::publish), the only loose files it may later remove there.
void write_owner_marker(const std::string& dir, const std::vector<std::string>& published = {});
// Whether `dir` is a directory (not a link to one) holding the marker as a regular file.
bool has_owner_marker(const std::string& dir);
// Refuses `path` when it is a symbolic link, naming it and `who` (the writer).
void refuse_symlink(const std::string& path, std::string_view who);

// Whether `name` is one of leantune's temporary directory names (a staging, replaced or doomed directory:
// `checkpoint-N.tmp-HEX`, `….old-HEX`, `….deleting-HEX`, `.leantune-staging-HEX`, and those nested).
bool is_staging_name(const std::string& name);

// Removes a directory leantune created: renamed to `<dir>.deleting-HEX` first (so a kill mid-delete leaves
// nothing under its listed name), then deleted. `between` runs after the rename (tests inject faults there).
// Refuses a directory without the marker.
void remove_owned_directory(const std::string& dir,
                            const std::function<void(const std::string& doomed)>& between = nullptr);

struct OutputInput {
  std::string key;   // how the user named it: "base_model", "--adapter", ...
  std::string path;  // a file or directory
};

struct OutputDirOptions {
  std::string who;  // names the setting in messages: "config: 'output_dir'", "export: --output_dir"
  std::vector<OutputInput> inputs;  // the output may not be, be inside, or contain any of them
  bool overwrite = false;           // --overwrite_output_dir: also claim a directory with others' files
};

// The claim on an output directory for one run: checks the rule above, creates the directory (or marks an
// empty one), takes the lock, and removes this directory's stale staging directories of interrupted runs.
class OutputDir {
 public:
  OutputDir(std::string path, const OutputDirOptions& options);
  ~OutputDir();  // releases the lock
  // The refusals of the constructor, with nothing created, marked or locked: a command with long work
  // before its first write checks first and claims later.
  static void check(const std::string& path, const OutputDirOptions& options);
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;

  const std::string& path() const { return path_; }
  // A new staging directory inside, `.leantune-staging-HEX`, carrying the marker.
  std::string make_staging() const;
  // Moves `names` from `staging` into the output directory (each a rename; every destination is checked
  // for links before the first one moves), records them in the marker, then removes `staging`. Files an
  // earlier publish recorded that `superseded` says this set replaces (model shards of another count) are
  // removed; nothing unrecorded is.
  void publish(const std::string& staging, const std::vector<std::string>& names,
               const std::function<bool(const std::string&)>& superseded = nullptr);

 private:
  std::string path_;
  int lock_fd_ = -1;
  std::vector<std::string> published_;  // what the marker records
};

}  // namespace lt::io

#include "train/sharded_checkpoint.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/json_field.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "train/rank_zero.h"

namespace lt::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kManifestKind = "a leantune sharded optimizer manifest";
constexpr const char* kMoments[] = {"exp_avg", "exp_avg_sq"};

// The manifest: for every moment tensor of every trained tensor, which rank file holds which elements.
nlohmann::json manifest_json(const std::vector<DataParallel::StateCut>& layout, dist::Sharding sharding,
                             int world, int64_t step, DType state_dtype) {
  nlohmann::json files = nlohmann::json::array();
  for (int r = 0; r < world; ++r) files.push_back(optimizer_shard_file(r, world));
  nlohmann::json tensors = nlohmann::json::array();
  for (const DataParallel::StateCut& cut : layout) {
    nlohmann::json shards = nlohmann::json::array();
    for (int r = 0; r < world; ++r) {
      const DataParallel::Slice s = cut.ranks[size_t(r)];
      if (s.begin < s.end) shards.push_back({{"rank", r}, {"begin", s.begin}, {"end", s.end}});
    }
    for (const char* moment : kMoments)
      tensors.push_back({{"name", fmt::format("{}.{}", cut.name, moment)},
                         {"shape", cut.shape},
                         {"dtype", io::st_dtype_name(io::from_dtype(state_dtype))},
                         {"shards", shards}});
  }
  return {{"leantune", "sharded optimizer state"},
          {"format_version", 1},
          {"optimizer", "adamw"},
          {"sharding", std::string(dist::sharding_name(sharding))},
          {"world_size", world},
          {"step", step},
          {"files", files},
          {"tensors", tensors}};
}

// One moment tensor of the manifest, checked: its shards are ranks' files and cover [0, numel) in order.
struct ManifestTensor {
  std::vector<int64_t> shape;
  int64_t numel = 1;
  io::StDType dtype = io::StDType::F32;
  struct Shard {
    int rank;
    int64_t begin, end;
  };
  std::vector<Shard> shards;
};

ManifestTensor parse_tensor(const nlohmann::json& t, const std::string& where, int world) {
  ManifestTensor out;
  LT_CHECK(t.contains("shape") && t["shape"].is_array(), "{}: field 'shape' is {}, expected an array", where,
           t.value("shape", nlohmann::json()).dump());
  for (const nlohmann::json& d : t["shape"]) {
    LT_CHECK(d.is_number_integer() && d.get<int64_t>() >= 0 && d.get<int64_t>() < (int64_t(1) << 40),
             "{}: field 'shape' holds {}, expected non-negative integers", where, d.dump());
    out.shape.push_back(d.get<int64_t>());
    out.numel *= out.shape.back();
  }
  const std::string dtype = io::json_field<std::string>(t, {"dtype"}, where, kManifestKind);
  const std::optional<io::StDType> st = io::parse_st_dtype(dtype);
  LT_CHECK(st && (*st == io::StDType::F64 || *st == io::StDType::F32 || *st == io::StDType::BF16),
           "{}: field 'dtype' is '{}', expected F64, F32 or BF16", where, dtype);
  out.dtype = *st;
  LT_CHECK(t.contains("shards") && t["shards"].is_array(), "{}: field 'shards' is missing, expected an array",
           where);
  int64_t covered = 0;
  for (size_t j = 0; j < t["shards"].size(); ++j) {
    const std::string at = fmt::format("{} shards[{}]", where, j);
    const nlohmann::json& s = t["shards"][j];
    const int64_t rank = io::json_field<int64_t>(s, {"rank"}, at, kManifestKind);
    const int64_t begin = io::json_field<int64_t>(s, {"begin"}, at, kManifestKind);
    const int64_t end = io::json_field<int64_t>(s, {"end"}, at, kManifestKind);
    LT_CHECK(rank >= 0 && rank < world, "{}: field 'rank' is {}, expected 0 to {} (world_size {})", at, rank,
             world - 1, world);
    LT_CHECK(begin == covered && end > begin && end <= out.numel,
             "{}: [begin, end) is [{}, {}), expected to start at {} and end by {} (the shards cover the "
             "flattened tensor in order)",
             at, begin, end, covered, out.numel);
    out.shards.push_back({int(rank), begin, end});
    covered = end;
  }
  LT_CHECK(covered == out.numel, "{}: the shards cover {} of the tensor's {} elements", where, covered,
           out.numel);
  return out;
}

// The manifest of `dir`, checked, by tensor name; `world` and `step` from it.
struct Manifest {
  std::string path;
  int world = 1;
  int64_t step = 0;
  std::map<std::string, ManifestTensor> tensors;
};

Manifest read_manifest(const std::string& dir) {
  Manifest m;
  m.path = (fs::path(dir) / kOptimizerManifestFile).string();
  const nlohmann::json j = io::read_json_file(m.path);
  LT_CHECK(j.is_object(), "{}: not {}, expected a JSON object", m.path, kManifestKind);
  const int64_t version = io::json_field<int64_t>(j, {"format_version"}, m.path, kManifestKind);
  LT_CHECK(version == 1, "{}: field 'format_version' is {}, expected 1", m.path, version);
  const int64_t world = io::json_field<int64_t>(j, {"world_size"}, m.path, kManifestKind);
  LT_CHECK(world >= 1 && world <= 1000000, "{}: field 'world_size' is {}, expected 1 or more", m.path, world);
  m.world = int(world);
  m.step = io::json_field<int64_t>(j, {"step"}, m.path, kManifestKind);
  LT_CHECK(m.step >= 0, "{}: field 'step' is {}, expected a non-negative integer", m.path, m.step);
  // The rank files are named by rank and world size: a manifest cannot point outside its directory.
  LT_CHECK(j.contains("files") && j["files"].is_array() && j["files"].size() == size_t(world),
           "{}: field 'files' is {}, expected the {} rank files", m.path,
           j.value("files", nlohmann::json()).dump(), world);
  for (int r = 0; r < m.world; ++r)
    LT_CHECK(j["files"][size_t(r)] == optimizer_shard_file(r, m.world),
             "{}: field 'files[{}]' is {}, expected \"{}\"", m.path, r, j["files"][size_t(r)].dump(),
             optimizer_shard_file(r, m.world));
  LT_CHECK(j.contains("tensors") && j["tensors"].is_array(),
           "{}: field 'tensors' is missing, expected an array", m.path);
  for (size_t k = 0; k < j["tensors"].size(); ++k) {
    const std::string where = fmt::format("{}: tensors[{}]", m.path, k);
    const std::string name = io::json_field<std::string>(j["tensors"][k], {"name"}, where, kManifestKind);
    LT_CHECK(!m.tensors.count(name), "{}: tensor '{}' is listed twice", where, name);
    m.tensors[name] = parse_tensor(j["tensors"][k], fmt::format("{} ('{}')", where, name), m.world);
  }
  return m;
}

// Opens the rank files on first use (each rank reads only those that hold part of its slices).
class RankFiles {
 public:
  RankFiles(std::string dir, int world) : dir_(std::move(dir)), world_(world), files_(size_t(world)) {}
  const io::SafetensorsFile& file(int rank) {
    std::unique_ptr<io::SafetensorsFile>& f = files_[size_t(rank)];
    if (!f) {
      const std::string path = (fs::path(dir_) / optimizer_shard_file(rank, world_)).string();
      LT_CHECK(
          fs::is_regular_file(path),
          "checkpoint {}: rank file {} is missing ({} lists {} rank files); the checkpoint is incomplete",
          dir_, optimizer_shard_file(rank, world_), kOptimizerManifestFile, world_);
      f = io::SafetensorsFile::open(path);
    }
    return *f;
  }

 private:
  std::string dir_;
  int world_;
  std::vector<std::unique_ptr<io::SafetensorsFile>> files_;
};

// Elements [begin, end) of the manifest's tensor `name`, copied from the rank files that hold them.
std::vector<char> assemble(const Manifest& m, RankFiles& files, const std::string& name,
                           const std::vector<int64_t>& shape, int64_t begin, int64_t end) {
  const auto it = m.tensors.find(name);
  LT_CHECK(it != m.tensors.end(), "{}: no tensor '{}' in 'tensors', expected this run's trained tensors",
           m.path, name);
  const ManifestTensor& t = it->second;
  LT_CHECK(t.shape == shape, "{}: tensor '{}' has shape [{}], but this run trains it with shape [{}]", m.path,
           name, fmt::join(t.shape, ", "), fmt::join(shape, ", "));
  const size_t element = size_t(io::st_dtype_bits(t.dtype) / 8);
  std::vector<char> out(size_t(end - begin) * element);
  for (const ManifestTensor::Shard& s : t.shards) {
    const int64_t from = std::max(begin, s.begin), to = std::min(end, s.end);
    if (from >= to) continue;
    const io::SafetensorsFile& f = files.file(s.rank);
    const io::SafetensorsEntry* e = f.find(name);
    LT_CHECK(e != nullptr, "{}: no tensor '{}', expected rank {}'s elements [{}, {}) of it ({})", f.path(),
             name, s.rank, s.begin, s.end, kOptimizerManifestFile);
    LT_CHECK(e->numel() == s.end - s.begin && e->dtype == t.dtype,
             "{}: tensor '{}' has {} elements of {}, expected {} of {} ({}: elements [{}, {}))", f.path(),
             name, e->numel(), io::st_dtype_name(e->dtype), s.end - s.begin, io::st_dtype_name(t.dtype),
             kOptimizerManifestFile, s.begin, s.end);
    std::memcpy(out.data() + size_t(from - begin) * element, e->data + size_t(from - s.begin) * element,
                size_t(to - from) * element);
  }
  return out;
}

}  // namespace

std::string optimizer_shard_file(int rank, int world_size) {
  return fmt::format("optimizer.rank{:05d}-of-{:05d}.safetensors", rank, world_size);
}

bool has_optimizer_shards(const std::string& dir) {
  std::error_code ec;
  return fs::exists(fs::path(dir) / kOptimizerManifestFile, ec);
}

std::string save_sharded_checkpoint(const ops::Context& ctx, dist::Communicator& comm,
                                    const std::string& output_dir, const CheckpointContents& c,
                                    const std::vector<DataParallel::StateCut>& layout,
                                    dist::Sharding sharding, int64_t save_total_limit, double timeout_s) {
  const int rank = comm.rank(), world = comm.world_size();
  const std::string name = checkpoint_dir_name(c.state.step);
  const std::string final_path = (fs::path(output_dir) / name).string();
  // Rank 0's temporary directory: removed with every rank's files as this function unwinds, unless
  // published.
  std::optional<io::AtomicDirectory> dir;
  std::string writing = "its temporary directory", error;
  auto attempt = [&](const std::function<void()>& work) {
    try {
      work();
    } catch (const std::exception& e) {
      error = fmt::format("writing {} ({}): {}", name, writing, e.what());
    }
  };
  if (comm.is_main())
    attempt([&] {
      fs::create_directories(output_dir);
      dir.emplace(final_path);
      writing = "the weights";
      write_weights(ctx, dir->path(), c);  // replaces the directory as a whole: before any other file
    });
  comm.agree(error, timeout_s);
  const std::string temp = broadcast_text(comm, comm.is_main() ? dir->path() : "");
  attempt([&] {
    if (c.write_extra) c.write_extra(temp);
    writing = optimizer_shard_file(rank, world);
    std::vector<std::vector<char>> staging;
    io::write_safetensors((fs::path(temp) / writing).string(),
                          on_host(ctx, c.optimizer->state_tensors(), staging),
                          {{"leantune", "optimizer shard"},
                           {"optimizer", "adamw"},
                           {"rank", std::to_string(rank)},
                           {"world_size", std::to_string(world)}});
    if (!comm.is_main()) return;
    writing = kOptimizerManifestFile;
    io::write_json_file_atomic((fs::path(temp) / writing).string(),
                               manifest_json(layout, sharding, world, c.optimizer->steps_taken(),
                                             c.optimizer->options().state_dtype));
    writing = "the trainer state";
    write_trainer_files(temp, c);
  });
  comm.agree(error, timeout_s);  // any rank's failure: thrown on every rank, the directory removed
  if (comm.is_main())
    attempt([&] {
      writing = "publishing it";
      publish_checkpoint(*dir, output_dir, c, save_total_limit);
    });
  comm.agree(error, timeout_s);
  return final_path;
}

void load_optimizer_shards(const std::string& dir, const std::vector<DataParallel::StateCut>& layout,
                           int rank, AdamW& optimizer) {
  const Manifest m = read_manifest(dir);
  RankFiles files(dir, m.world);
  double step = double(m.step);
  std::vector<std::vector<char>> buffers;
  std::vector<io::NamedTensor> tensors{{"step", Tensor(&step, DType::F64, {1})}};
  for (const DataParallel::StateCut& cut : layout) {
    const DataParallel::Slice mine = cut.ranks[size_t(rank)];
    if (mine.begin == mine.end) continue;  // not this rank's (DataParallel::optimizer_groups)
    for (const char* moment : kMoments) {
      const std::string name = fmt::format("{}.{}", cut.name, moment);
      buffers.push_back(assemble(m, files, name, cut.shape, mine.begin, mine.end));
      const DType dtype = *io::to_dtype(m.tensors.at(name).dtype);
      tensors.push_back({name, Tensor(buffers.back().data(), dtype, {mine.end - mine.begin})});
    }
  }
  optimizer.load_state(tensors, m.path);
}

void load_optimizer_slices_of_whole(const std::string& dir, const std::vector<DataParallel::StateCut>& layout,
                                    int rank, AdamW& optimizer) {
  const std::string path = (fs::path(dir) / kOptimizerFile).string();
  const std::unique_ptr<io::SafetensorsFile> file = io::SafetensorsFile::open(path);
  // A view of `count` elements of `e` from element `begin` (the mapping is read only: load_state copies).
  auto view = [&](const io::SafetensorsEntry& e, int64_t begin, int64_t count) {
    const std::optional<DType> dtype = io::to_dtype(e.dtype);
    LT_CHECK(dtype.has_value(), "{}: tensor '{}' has dtype {}, expected a floating dtype", path, e.name,
             io::st_dtype_name(e.dtype));
    const size_t element = size_t(io::st_dtype_bits(e.dtype) / 8);
    return Tensor(const_cast<uint8_t*>(e.data) + size_t(begin) * element, *dtype, {count});
  };
  const io::SafetensorsEntry* step = file->find("step");
  LT_CHECK(step != nullptr && step->numel() == 1, "{}: no one-element tensor 'step', expected AdamW's step count",
           path);
  std::vector<io::NamedTensor> tensors{{"step", view(*step, 0, 1)}};
  for (const DataParallel::StateCut& cut : layout) {
    const DataParallel::Slice mine = cut.ranks[size_t(rank)];
    if (mine.begin == mine.end) continue;  // not this rank's (DataParallel::optimizer_groups)
    for (const char* moment : kMoments) {
      const std::string name = fmt::format("{}.{}", cut.name, moment);
      const io::SafetensorsEntry* e = file->find(name);
      LT_CHECK(e != nullptr, "{}: no tensor '{}', expected the moments of this run's trained tensors", path,
               name);
      LT_CHECK(e->shape == cut.shape, "{}: tensor '{}' has shape [{}], but this run trains it with shape [{}]",
               path, name, fmt::join(e->shape, ", "), fmt::join(cut.shape, ", "));
      tensors.push_back({name, view(*e, mine.begin, mine.end - mine.begin)});
    }
  }
  optimizer.load_state(tensors, path);
}

TrainerState resume_checkpoint(const ops::Context& ctx, const std::string& dir,
                               const model::ModelConfig& model, model::ModelWeights& weights,
                               const DataParallel& data_parallel, int rank, AdamW& optimizer,
                               model::LoraWeights* lora, const io::LoraAdapterConfig* adapter,
                               const model::StreamedWeights* streamed) {
  if (has_optimizer_shards(dir)) {
    const TrainerState s = load_weights_and_state(ctx, dir, model, weights, lora, adapter, streamed);
    load_optimizer_shards(dir, data_parallel.state_layout(), rank, optimizer);
    check_optimizer_step(dir, optimizer, s);
    return s;
  }
  if (data_parallel.shards_optimizer() && !optimizer.options().eight_bit) {
    // A whole optimizer.safetensors (one process's or ddp's) and a sharded optimizer: this rank's elements
    // of each moment are read from the mapped file, so the whole moments never exist in memory.
    const TrainerState s = load_weights_and_state(ctx, dir, model, weights, lora, adapter, streamed);
    load_optimizer_slices_of_whole(dir, data_parallel.state_layout(), rank, optimizer);
    check_optimizer_step(dir, optimizer, s);
    return s;
  }
  // A whole optimizer.safetensors: loaded whole, then sliced when this run shards its optimizer (8-bit
  // AdamW: its blocks' scales are not cut by elements).
  std::unique_ptr<AdamW> whole = data_parallel.whole_optimizer(optimizer.options());
  const TrainerState s =
      load_checkpoint(ctx, dir, model, weights, whole ? *whole : optimizer, lora, adapter, streamed);
  if (whole) data_parallel.scatter_state(*whole, optimizer);
  return s;
}

}  // namespace lt::train

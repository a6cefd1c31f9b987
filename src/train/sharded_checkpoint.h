// Training checkpoints of a run whose optimizer state is sharded over its ranks (sharding zero1, zero2,
// zero3; train/data_parallel.h): no rank gathers the state, each writes its own slices. OUTPUT_DIR/
// checkpoint-STEP/ then holds
//   optimizer.rankRRRRR-of-WWWWW.safetensors  rank R's AdamW state (every rank writes its own): "step", and
//                                             per tensor whose slice on rank R is not empty
//                                             "<name>.exp_avg", "<name>.exp_avg_sq" as 1-D tensors of the
//                                             slice's elements
//   optimizer.manifest.json                   (rank 0) world_size, sharding, step, the rank files, and per
//                                             moment tensor its full shape, dtype and which rank's file
//                                             holds which [begin, end) of the flattened tensor (the
//                                             DataParallel layout: state_layout())
//   the weights or the LoRA adapter, trainer_state.json, train_config.yaml
//                                             (rank 0) as one process writes them (checkpoint.h)
// and no optimizer.safetensors. Written atomically by all ranks: rank 0 creates the temporary directory
// (io/atomic_file.h) and writes the weights into it, every rank then writes its files there, and the ranks
// agree (dist/communicator.h) before rank 0 renames it into place and rotates save_total_limit: a failure
// on any rank stops every rank with one error naming the rank and the file, and the temporary directory is
// removed, so the previous checkpoint stays the latest. The ranks must share output_dir's filesystem.
//
// Resume reads the manifest and assembles each rank's slice of every tensor from the rank files whose
// ranges overlap it, so a checkpoint written by W ranks resumes at any world size and under any sharding
// (none and ddp assemble whole tensors); a whole optimizer.safetensors (one process, ddp) resumes a sharded
// run as before (DataParallel::scatter_state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/sharding.h"
#include "train/checkpoint.h"
#include "train/data_parallel.h"

namespace lt::train {

inline constexpr const char* kOptimizerManifestFile = "optimizer.manifest.json";
std::string optimizer_shard_file(int rank, int world_size);    // "optimizer.rank00001-of-00004.safetensors"
bool has_optimizer_shards(const std::string& checkpoint_dir);  // the manifest is there

// A collective: every rank calls it with `contents.optimizer` its own AdamW (over its slices) and the run's
// `layout`. contents.write_extra runs on every rank, before its shard is written. Returns the checkpoint's
// path; throws on every rank when any rank failed.
std::string save_sharded_checkpoint(const ops::Context& ctx, dist::Communicator& comm,
                                    const std::string& output_dir, const CheckpointContents& contents,
                                    const std::vector<DataParallel::StateCut>& layout,
                                    dist::Sharding sharding, int64_t save_total_limit, double timeout_s);

// Loads `optimizer` (over rank `rank`'s non-empty slices of `layout`, in its order) from a sharded
// checkpoint written at any world size. Errors name the manifest or rank file and the field or tensor.
void load_optimizer_shards(const std::string& checkpoint_dir,
                           const std::vector<DataParallel::StateCut>& layout, int rank, AdamW& optimizer);
// The same from a whole kOptimizerFile (one process's or ddp's): only rank `rank`'s elements of each
// moment are read, from the mapped file (the whole moments are never copied into memory).
void load_optimizer_slices_of_whole(const std::string& checkpoint_dir,
                                    const std::vector<DataParallel::StateCut>& layout, int rank,
                                    AdamW& optimizer);

// What a resumed run of any sharding loads: the weights (or adapters) and trainer state, and this rank's
// optimizer state from the rank files (a sharded checkpoint) or from optimizer.safetensors (sliced when the
// run shards its optimizer).
TrainerState resume_checkpoint(const ops::Context& ctx, const std::string& checkpoint_dir,
                               const model::ModelConfig& model, model::ModelWeights& weights,
                               const DataParallel& data_parallel, int rank, AdamW& optimizer,
                               model::LoraWeights* lora = nullptr,
                               const io::LoraAdapterConfig* adapter = nullptr,
                               const model::StreamedWeights* streamed = nullptr);

}  // namespace lt::train

// The enumerated keys of a TrainConfig: each key's enum and its name table. The configuration reader turns
// text into these enums once (the tables are the accepted values; a key may accept a second spelling of a
// value, listed after the canonical one, which is what a saved configuration writes); past the reader, code
// compares enums, never strings.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/enum_names.h"
#include "core/tensor.h"
#include "data/dataset_records.h"
#include "data/dataset_types.h"
#include "dist/sharding.h"
#include "model/decoder.h"
#include "model/finetune.h"
#include "model/schedule_api.h"
#include "ops/kernel_options.h"
#include "ops/quant4.h"
#include "train/lr_schedule.h"

namespace lt::train {

using model::Finetune;

// Auto: a configuration's request (bf16 on cuda, fp32 on cpu), resolved with the device by
// resolve_auto_device (run_setup.h) before anything computes.
enum class Precision : uint8_t { Fp64, Fp32, Bf16, Fp16, Auto };
inline constexpr EnumName<Precision> kPrecisionNames[] = {{Precision::Fp64, "fp64"},
                                                          {Precision::Fp32, "fp32"},
                                                          {Precision::Bf16, "bf16"},
                                                          {Precision::Fp16, "fp16"}};
inline constexpr EnumName<Device> kDeviceNames[] = {{Device::CPU, "cpu"}, {Device::CUDA, "cuda"}};
// What a configuration or the command line may ask for: the concrete names above, and auto first.
inline constexpr EnumName<Precision> kPrecisionRequestNames[] = {{Precision::Auto, "auto"},
                                                                 {Precision::Fp64, "fp64"},
                                                                 {Precision::Fp32, "fp32"},
                                                                 {Precision::Bf16, "bf16"},
                                                                 {Precision::Fp16, "fp16"}};
inline constexpr EnumName<Device> kDeviceRequestNames[] = {
    {Device::Auto, "auto"}, {Device::CPU, "cpu"}, {Device::CUDA, "cuda"}};
inline constexpr EnumName<LrScheduleType> kLrScheduleNames[] = {{LrScheduleType::Constant, "constant"},
                                                                {LrScheduleType::Linear, "linear"},
                                                                {LrScheduleType::Cosine, "cosine"}};
inline constexpr EnumName<data::DataFormat> kDatasetFormatNames[] = {
    {data::DataFormat::auto_detect, "auto"},
    {data::DataFormat::alpaca, "alpaca"},
    {data::DataFormat::chat, "chat"},
    {data::DataFormat::chat, "sharegpt"},
    {data::DataFormat::chat, "messages"},
    {data::DataFormat::text, "text"},
    {data::DataFormat::prompt_completion, "prompt_completion"},
    {data::DataFormat::pretokenized, "pretokenized"}};
inline constexpr EnumName<data::OnBadRecord> kOnBadRecordNames[] = {{data::OnBadRecord::error, "error"},
                                                                    {data::OnBadRecord::skip, "skip"}};
// nullopt (auto): the schedule's default, none for whole sequences and full for chunked ones.
inline constexpr EnumName<std::optional<model::Recompute>> kRecomputeNames[] = {
    {std::nullopt, "auto"},
    {model::Recompute::None, "none"},
    {model::Recompute::Full, "full"},
    {model::Recompute::Selective, "selective"},
    {model::Recompute::Elementwise, "elementwise"},
    {model::Recompute::Norms, "norms"}};
// The loop order of training's schedule (model/schedule_api.h): chunk_major (the default) or layer_major.
inline constexpr EnumName<model::ScheduleOrder> kScheduleOrderNames[] = {
    {model::ScheduleOrder::ChunkMajor, "chunk_major"}, {model::ScheduleOrder::LayerMajor, "layer_major"}};
// The configuration's names for the attention kernels (the environment override also takes tc and simt).
inline constexpr EnumName<ops::AttentionKernelRequest> kAttentionNames[] = {
    {ops::AttentionKernelRequest::Auto, "auto"},
    {ops::AttentionKernelRequest::Cudnn, "cudnn"},
    {ops::AttentionKernelRequest::TensorCore, "leantune"}};
inline constexpr EnumName<ops::ProfileOps> kProfileOpsNames[] = {
    {ops::ProfileOps::Off, "off"}, {ops::ProfileOps::Ops, "ops"}, {ops::ProfileOps::Shapes, "shapes"}};
// bitsandbytes' 4-bit codes (BitsAndBytesConfig's bnb_4bit_quant_type).
inline constexpr EnumName<ops::Quant4Type> kQuant4TypeNames[] = {{ops::Quant4Type::NF4, "nf4"},
                                                                 {ops::Quant4Type::FP4, "fp4"}};
// The optimizer (HF TrainingArguments' optim). adamw_torch: torch.optim.AdamW's arithmetic (train/adamw.h);
// adamw_8bit: bitsandbytes' AdamW with 8-bit state (train/adamw8bit.h), under each of HF's names for it
// (adamw_bnb_8bit and paged_adamw_8bit build the same bnb.optim.AdamW(optim_bits=8); paging only moves
// state between host and device, not the arithmetic).
enum class Optim : uint8_t { AdamWTorch, AdamW8bit };
inline constexpr EnumName<Optim> kOptimNames[] = {{Optim::AdamWTorch, "adamw_torch"},
                                                  {Optim::AdamW8bit, "adamw_8bit"},
                                                  {Optim::AdamW8bit, "adamw_bnb_8bit"},
                                                  {Optim::AdamW8bit, "paged_adamw_8bit"}};
// When training checkpoints are written (HF TrainingArguments' save_strategy): every save_steps and at the
// end (steps), or never (no: only the final model; a run that stops early cannot resume).
enum class SaveStrategy : uint8_t { Steps, No };
inline constexpr EnumName<SaveStrategy> kSaveStrategyNames[] = {{SaveStrategy::Steps, "steps"},
                                                                {SaveStrategy::No, "no"}};
// DeepSpeed's stage names, then PyTorch FSDP's names for the same strategies (dist/sharding.h).
inline constexpr EnumName<dist::Sharding> kShardingNames[] = {
    {dist::Sharding::None, "none"},           {dist::Sharding::Ddp, "ddp"},
    {dist::Sharding::Zero1, "zero1"},         {dist::Sharding::Zero2, "zero2"},
    {dist::Sharding::Zero3, "zero3"},         {dist::Sharding::Ddp, "no_shard"},
    {dist::Sharding::Zero2, "shard_grad_op"}, {dist::Sharding::Zero3, "full_shard"}};

// A table's canonical name for `value`.
template <class E, size_t N>
const char* name_of(const EnumName<E> (&table)[N], E value) {
  return enum_name(std::span<const EnumName<E>>(table), value);
}

// Precision and device given alone (eval and generate take them without a TrainConfig; auto accepted);
// `who` starts the message.
Precision parse_precision(const std::string& text, const std::string& who);
Device parse_device(const std::string& text, const std::string& who);

}  // namespace lt::train

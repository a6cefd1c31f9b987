// How training state is spread over the ranks (`sharding` in the training configuration). The names are
// DeepSpeed's ZeRO stages; PyTorch FSDP's names are accepted for the same strategies:
//   none (FSDP no_shard with one process)  every rank holds everything, nothing is reduced;
//   ddp  (FSDP no_shard)                   full replicas, gradients all-reduced;
//   zero1                                  optimizer state (and f32 masters) sharded;
//   zero2 (FSDP shard_grad_op)             gradients sharded too (reduce-scattered);
//   zero3 (FSDP full_shard)                weights sharded too, gathered layer by layer.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lt::dist {

enum class Sharding { None, Ddp, Zero1, Zero2, Zero3 };

std::string_view sharding_name(Sharding s);  // the canonical name: none, ddp, zero1, zero2, zero3
// A canonical name or an FSDP alias (no_shard = ddp, shard_grad_op = zero2, full_shard = zero3);
// nullopt for anything else.
std::optional<Sharding> parse_sharding(std::string_view name);
// Every accepted spelling, canonical names first (for the configuration's list of choices).
const std::vector<std::string>& sharding_spellings();

}  // namespace lt::dist

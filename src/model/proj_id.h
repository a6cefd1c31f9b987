// The projections of a decoder block, named: every per-projection array (LoRA adapters, their activations t,
// weights by projection) is indexed by ProjId, never by a bare number.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace lt::model {

// In the order of their HF module names (q_proj ... down_proj); that order is also the order of a layer's
// adapters in PEFT files and in allocate_lora's layout.
enum class ProjId : uint8_t { Q, K, V, O, Gate, Up, Down };
inline constexpr int kProjCount = 7;
inline constexpr ProjId kAllProjs[kProjCount] = {ProjId::Q,    ProjId::K,  ProjId::V,   ProjId::O,
                                                 ProjId::Gate, ProjId::Up, ProjId::Down};

// One T per projection, indexed by ProjId.
template <typename T>
struct PerProj {
  std::array<T, kProjCount> items{};
  T& operator[](ProjId p) { return items[size_t(p)]; }
  const T& operator[](ProjId p) const { return items[size_t(p)]; }
  auto begin() { return items.begin(); }
  auto end() { return items.end(); }
  auto begin() const { return items.begin(); }
  auto end() const { return items.end(); }
};

}  // namespace lt::model

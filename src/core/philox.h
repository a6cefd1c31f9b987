// Philox4x32-10 counter-based RNG (Salmon et al., SC'11). Stateless: the value of element i of stream s
// under seed k is a pure function of (k, s, i), so CPU and GPU produce the same numbers in any order and a
// resumed run reproduces them from (seed, stream, offset) alone.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#include "core/dtype.h"  // LT_HOST_DEVICE

namespace lt {

struct PhiloxKey {
  uint32_t k0, k1;
};
struct PhiloxCounter {
  uint32_t c0, c1, c2, c3;
};

LT_HOST_DEVICE inline void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t product = uint64_t(a) * uint64_t(b);
  hi = uint32_t(product >> 32);
  lo = uint32_t(product);
}

// One block of four 32-bit outputs.
LT_HOST_DEVICE inline PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kMul0, c.c0, hi0, lo0);
    philox_mulhilo(kMul1, c.c2, hi1, lo1);
    c = {hi1 ^ c.c1 ^ k.k0, lo1, hi0 ^ c.c3 ^ k.k1, lo0};
    k.k0 += kWeyl0;
    k.k1 += kWeyl1;
  }
  return c;
}

// The 32 random bits of element `index` of `stream` under `seed`: block index/4, lane index%4.
LT_HOST_DEVICE inline uint32_t philox_bits(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t block = index >> 2;
  PhiloxCounter out =
      philox4x32_10({uint32_t(block), uint32_t(block >> 32), uint32_t(stream), uint32_t(stream >> 32)},
                    {uint32_t(seed), uint32_t(seed >> 32)});
  switch (index & 3) {
    case 0:
      return out.c0;
    case 1:
      return out.c1;
    case 2:
      return out.c2;
    default:
      return out.c3;
  }
}

// Uniform in [0, 1) with 24 random bits (exactly representable in float).
LT_HOST_DEVICE inline float philox_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return float(philox_bits(seed, stream, index) >> 8) * (1.0f / 16777216.0f);
}

// The four 32-bit outputs of one Philox block: elements 4*block .. 4*block+3 of `stream`.
LT_HOST_DEVICE inline PhiloxCounter philox_block(uint64_t seed, uint64_t stream, uint64_t block) {
  return philox4x32_10({uint32_t(block), uint32_t(block >> 32), uint32_t(stream), uint32_t(stream >> 32)},
                       {uint32_t(seed), uint32_t(seed >> 32)});
}

// A double in [0, 1) from two 32-bit draws: 27 high bits of the first, 26 of the second.
LT_HOST_DEVICE inline double philox_double_of(uint32_t first, uint32_t second) {
  const uint64_t hi = first >> 5, lo = second >> 6;
  return double((hi << 26) | lo) * (1.0 / 9007199254740992.0);
}

// Uniform in [0, 1) with 53 random bits, from elements 2i and 2i+1 (which one block holds: computed once).
LT_HOST_DEVICE inline double philox_uniform_double(uint64_t seed, uint64_t stream, uint64_t index) {
  const PhiloxCounter c = philox_block(seed, stream, index >> 1);
  return index & 1 ? philox_double_of(c.c2, c.c3) : philox_double_of(c.c0, c.c1);
}

// Standard normal by Box-Muller from the uniform doubles 2i and 2i+1 (deterministic given the index): the
// four draws are one Philox block, computed once (random initialization of a large model is dominated by it).
LT_HOST_DEVICE inline double philox_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  const PhiloxCounter c = philox_block(seed, stream, index);
  const double u1 = philox_double_of(c.c0, c.c1);
  const double u2 = philox_double_of(c.c2, c.c3);
  double r = sqrt(-2.0 * log(1.0 - u1));  // 1 - u1 is in (0, 1]
  return r * cos(6.283185307179586 * u2);
}

// A host-side cursor over one stream: what training checkpoints save (seed, stream, offset).
struct PhiloxStream {
  uint64_t seed = 0;
  uint64_t stream = 0;
  uint64_t offset = 0;  // next element index

  uint32_t next_bits() { return philox_bits(seed, stream, offset++); }
  float next_uniform() { return philox_uniform(seed, stream, offset++); }
  double next_uniform_double() { return philox_uniform_double(seed, stream, offset++); }
  double next_normal() { return philox_normal(seed, stream, offset++); }
  // Uniform integer in [0, n) without modulo bias (rejection on 32-bit draws).
  uint32_t next_below(uint32_t n);
};

inline uint32_t PhiloxStream::next_below(uint32_t n) {
  uint32_t limit = uint32_t(-n) % n;  // 2^32 mod n: draws below it are rejected
  for (;;) {
    uint32_t r = next_bits();
    if (r >= limit) return r % n;
  }
}

}  // namespace lt

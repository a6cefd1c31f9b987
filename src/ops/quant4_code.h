// The 4-bit code tables and the value -> code decisions of bitsandbytes' NF4 and FP4, shared by the CPU
// reference (ops/cpu/quant4.cpp) and the CUDA kernels (ops/cuda/quant4.cu): f32 constants only, no arrays
// indexed at run time, so that both compilers see the same comparisons.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"

// Code -> value, index = code. FP4 codes 8..15 are the negatives of 0..7 (code 8 is -0.0).
#define LT_NF4_CODE_VALUES                                                                            \
  -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,    \
      -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f, \
      0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,          \
      0.7229568362236023f, 1.0f
#define LT_FP4_CODE_VALUES                                                                                  \
  0.0f, 0.005208333333f, 0.66666667f, 1.0f, 0.33333333f, 0.5f, 0.16666667f, 0.25f, -0.0f, -0.005208333333f, \
      -0.66666667f, -1.0f, -0.33333333f, -0.5f, -0.16666667f, -0.25f

namespace lt::ops {

// NF4: the number of the 15 f32 midpoints (between adjacent codes) that `scaled` is strictly above: the
// nearest code, a value exactly on a midpoint going to the lower one. NaN is above none: code 0.
LT_HOST_DEVICE inline uint8_t nf4_code(float x) {
  return uint8_t((x > -0.8480964004993439f) + (x > -0.6106329262256622f) + (x > -0.4599952697753906f) +
                 (x > -0.33967943489551544f) + (x > -0.23460740596055984f) + (x > -0.13791173323988914f) +
                 (x > -0.045525018125772476f) + (x > 0.03979014977812767f) + (x > 0.1202552504837513f) +
                 (x > 0.2035212516784668f) + (x > 0.2920137718319893f) + (x > 0.3893125355243683f) +
                 (x > 0.5016634166240692f) + (x > 0.6427869200706482f) + (x > 0.8614784181118011f));
}

// FP4: a sign bit (8, for x < 0) and a 3-bit magnitude code. The magnitudes in code order are 0, 1/192,
// 2/3, 1, 1/3, 1/2, 1/6, 1/4; `rank` counts the midpoints (ascending magnitudes) below |x|, and the nibbles
// of 0x32547610 map rank -> magnitude code. NaN: rank 0, no sign: code 0.
LT_HOST_DEVICE inline uint8_t fp4_code(float x) {
  const uint8_t sign = x < 0.0f ? 8 : 0;
  const float m = fabsf(x);
  const int rank = (m > 0.00260417f) + (m > 0.0859375f) + (m > 0.20833333f) + (m > 0.29166667f) +
                   (m > 0.4166667f) + (m > 0.583333f) + (m > 0.8333333f);
  return uint8_t(((0x32547610u >> (4 * rank)) & 0xfu) + sign);
}

// bitsandbytes' 8-bit blockwise code (dQuantize) of `x` over a sorted 256-value map: seven halving steps from
// the middle, then one midpoint test against the neighbour the search last stepped away from (the map's ends
// when it never did): the nearest value; a tie goes where the last probe sends it. NaN gets code 0. The
// midpoints are an add then a multiply, which no compiler fuses.
LT_HOST_DEVICE inline uint8_t dynamic8_code(const float* map, float x) {
  int pivot = 127, upper_pivot = 255, lower_pivot = 0;
  float lower = -1.0f, upper = 1.0f;
  float val = map[pivot];
  for (int step = 64; step > 0; step >>= 1) {
    if (x > val) {
      lower_pivot = pivot;
      lower = val;
      pivot += step;
    } else {
      upper_pivot = pivot;
      upper = val;
      pivot -= step;
    }
    val = map[pivot];
  }
  if (upper_pivot == 255) upper = map[255];
  if (lower_pivot == 0) lower = map[0];
  if (x > val) return uint8_t(x > (upper + val) * 0.5f ? upper_pivot : pivot);
  return uint8_t(x < (lower + val) * 0.5f ? lower_pivot : pivot);
}

}  // namespace lt::ops

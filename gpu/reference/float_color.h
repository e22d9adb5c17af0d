// Luma and mean of float RGB as the shaders compute them (luma_f, mean_f in
// gpu/shaders/prelude.glsl): each operation rounded once in float, every input and result below
// the smallest normal float taken as 0 (so that devices that flush subnormals and those that keep
// them agree). Compiled without contraction (-ffp-contract=off), like every reference.
#ifndef GLIMPSE_GPU_REFERENCE_FLOAT_COLOR_H_
#define GLIMPSE_GPU_REFERENCE_FLOAT_COLOR_H_

#include <cmath>
#include <limits>

namespace glimpse::reference {

inline float FlushSubnormal(float v) {
  return std::fabs(v) < std::numeric_limits<float>::min() ? 0.0f : v;
}

inline float LumaF(float r, float g, float b) {
  const float wr = 0.299f * FlushSubnormal(r), wg = 0.587f * FlushSubnormal(g),
              wb = 0.114f * FlushSubnormal(b);
  const float rg = FlushSubnormal(wr) + FlushSubnormal(wg);
  return FlushSubnormal(FlushSubnormal(rg) + FlushSubnormal(wb));
}

inline float MeanF(float r, float g, float b) {
  const float rg = FlushSubnormal(r) + FlushSubnormal(g);
  const float sum = FlushSubnormal(rg) + FlushSubnormal(b);
  return FlushSubnormal(FlushSubnormal(sum) * (1.0f / 3.0f));
}

}  // namespace glimpse::reference

#endif  // GLIMPSE_GPU_REFERENCE_FLOAT_COLOR_H_

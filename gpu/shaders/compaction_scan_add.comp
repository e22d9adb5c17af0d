// Ordered scan, pass 2 (going back down): adds the scanned total of the runs before each run of
// 1024 values to every value of the run.
#include "compaction_block_scan.glsl"

layout(std430, binding = 2) buffer Data { uint data[]; };
layout(std430, binding = 4) readonly buffer Sums { uint sums[]; };
uniform uint u_count;

void main() {
  uint g = flat_group_index();
  if (g >= u_num_groups || g == 0u) return;
  uint add = sums[g];
  uint base = (g * kThreads + gl_LocalInvocationIndex) * 4u;
  for (uint k = 0u; k < 4u; ++k) {
    if (base + k < u_count) data[base + k] += add;
  }
}

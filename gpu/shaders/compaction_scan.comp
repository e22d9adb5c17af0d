// Ordered scan, pass 2 (one level): an exclusive scan, in place, of each run of 1024 values
// (4 per invocation); the run's total goes to sums[run]. Levels repeat on the sums until one run
// is left, then compaction_scan_add.comp adds the scanned sums back down.
#include "compaction_block_scan.glsl"

layout(std430, binding = 2) buffer Data { uint data[]; };
layout(std430, binding = 4) writeonly buffer Sums { uint sums[]; };
uniform uint u_count;  // values in data

void main() {
  uint g = flat_group_index();
  if (g >= u_num_groups) return;
  uint base = (g * kThreads + gl_LocalInvocationIndex) * 4u;
  uint v[4];
  uint sum = 0u;
  for (uint k = 0u; k < 4u; ++k) {
    v[k] = base + k < u_count ? data[base + k] : 0u;
    sum += v[k];
  }
  uint total;
  uint prefix = workgroup_exclusive_scan(sum, total);
  for (uint k = 0u; k < 4u; ++k) {
    if (base + k < u_count) data[base + k] = prefix;
    prefix += v[k];
  }
  if (gl_LocalInvocationIndex == 0u) sums[g] = total;
}

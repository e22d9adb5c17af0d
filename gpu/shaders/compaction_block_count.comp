// Ordered scan, pass 1: each workgroup takes a block of 256 * PIXELS_PER_THREAD consecutive
// pixels of the band in row-major order, each invocation PIXELS_PER_THREAD consecutive ones.
// Writes the block's count and each invocation's pass bits (bit k: its k-th pixel), so the scatter
// pass need not read the image again, and adds the block's count to the band's counter.
// COUNT_ONLY: only the counter.
#include "compaction_common.glsl"
#include "compaction_block_scan.glsl"

layout(std430, binding = 0) buffer Counters { uint counters[]; };  // one per band
#if !defined(COUNT_ONLY)
layout(std430, binding = 2) writeonly buffer BlockCounts { uint block_counts[]; };
layout(std430, binding = 3) writeonly buffer PassBits { uint pass_bits[]; };  // one per invocation
#endif
uniform int u_band;

void main() {
  uint b = flat_group_index();
  if (b >= u_num_groups) return;  // whole workgroups only: barriers below stay uniform
  uint width = uint(u_size.x);
  uint band_pixels = uint(u_rows) * width;
  uint thread = b * kThreads + gl_LocalInvocationIndex;
  uint first = thread * uint(PIXELS_PER_THREAD);  // band-linear
  uint bits = 0u;
  if (first < band_pixels) {
    uint n = min(uint(PIXELS_PER_THREAD), band_pixels - first);
    int x = int(first % width);
    int y = u_row0 + int(first / width);
    for (uint k = 0u; k < n; ++k) {
      if (passes(ivec2(x, y))) bits |= 1u << k;
      if (++x == u_size.x) {
        x = 0;
        ++y;
      }
    }
  }
#if !defined(COUNT_ONLY)
  pass_bits[thread] = bits;
#endif
  uint total = workgroup_sum(uint(bitCount(bits)));
  if (gl_LocalInvocationIndex == 0u) {
#if !defined(COUNT_ONLY)
    block_counts[b] = total;
#endif
    if (total != 0u) atomicAdd(counters[u_band], total);
  }
}

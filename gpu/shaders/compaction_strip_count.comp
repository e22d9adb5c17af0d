// Strip scan, pass 1: each invocation takes one row of the band and counts the passing pixels of
// its segments privately (no atomics, no shared memory). List mode: writes, per group of four
// segments and with one store, each segment's offset within the row (an exclusive scan along the
// row), and the row's total. COUNT_ONLY: adds the row's total to the band's counter (one atomic
// per row).
#include "compaction_common.glsl"
#include "compaction_strip_common.glsl"

layout(std430, binding = 0) buffer Counters { uint counters[]; };  // one per band
#if !defined(COUNT_ONLY)
layout(std430, binding = 2) writeonly buffer SegmentOffsets { uvec4 offsets[]; };  // per group
layout(std430, binding = 4) writeonly buffer RowTotals { uint row_totals[]; };
#endif
uniform int u_band;

void main() {
  uint r = flat_invocation();
  if (r >= u_items) return;
  int y = u_row0 + int(r);
  uint n = 0u;
  for (int g = 0; g < u_groups; ++g) {
    uvec4 first;
    for (int s = 0; s < 4; ++s) {
      first[s] = n;
      n += uint(bitCount(segment_bits(y, g * GROUP_PIXELS + s * SEG)));
    }
#if !defined(COUNT_ONLY)
    offsets[r * uint(u_groups) + uint(g)] = first;
#endif
  }
#if defined(COUNT_ONLY)
  if (n != 0u) atomicAdd(counters[u_band], n);
#else
  row_totals[r] = n;
#endif
}

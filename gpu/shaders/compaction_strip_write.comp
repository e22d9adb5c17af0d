// Strip scan, pass 3: each invocation re-reads its group's four segments and writes the key
// (y << 16) | x of every passing pixel at its row's offset plus its segment's offset in the row
// plus its rank, so the list comes out in row-major order. Positions at or past u_cap are not
// written.
#include "compaction_common.glsl"
#include "compaction_strip_common.glsl"

layout(std430, binding = 1) writeonly buffer Indices { uint indices[]; };
layout(std430, binding = 2) readonly buffer SegmentOffsets { uvec4 offsets[]; };  // per group
layout(std430, binding = 4) readonly buffer RowOffsets { uint row_offsets[]; };
uniform uint u_cap;  // list entries wanted from this band

void main() {
  uint i = flat_invocation();
  if (i >= u_items) return;
  uint row = i / uint(u_groups);
  uvec4 first = offsets[i] + row_offsets[row];
  if (first.x >= u_cap) return;
  int y = u_row0 + int(row);
  int x0 = int(i % uint(u_groups)) * GROUP_PIXELS;
  uint high = uint(y) << 16;
  for (int s = 0; s < 4; ++s) {
    uint bits = segment_bits(y, x0 + s * SEG);
    uint at = first[s];
    uint key0 = high | uint(x0 + s * SEG);
    while (bits != 0u && at < u_cap) {
      int k = findLSB(bits);
      bits &= bits - 1u;
      indices[at++] = key0 + uint(k);
    }
  }
}

// Adds each block's scanned offset (integral_block_sums) to its elements.
// Rows (default): element e of line `line` (pixel e / CHANNELS) gets
//   sums[(line * nblocks + pixel / BLOCK) * CHANNELS + e % CHANNELS].
// COLUMNS: element k of row r gets sums[(r / CBLOCK) * cols + k].
#include "integral_common.glsl"

layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer Table { uvec2 table[]; };
layout(std430, binding = 3) readonly buffer Sums { uvec2 sums[]; };

uniform uint u_elems;   // rows: elements per line; COLUMNS: elements per row
uniform uint u_first;   // first element to update (skips a zero first block)
uniform int u_nblocks;  // rows: blocks per line
uniform uint u_line0;   // first line (row) to update

void main() {
  uint e = u_first + gl_GlobalInvocationID.x;
  if (e >= u_elems) return;
  uint line = u_line0 + gl_WorkGroupID.y;
  uint i = line * u_elems + e;
#if defined(COLUMNS)
  uint o = (line / uint(CBLOCK)) * u_elems + e;
#else
  uint pixel = e / uint(CHANNELS);
  uint o = (line * uint(u_nblocks) + pixel / uint(BLOCK)) * uint(CHANNELS) + e % uint(CHANNELS);
#endif
  table[i] = acc_store(acc_add(acc_load(table[i]), acc_load(sums[o])));
}

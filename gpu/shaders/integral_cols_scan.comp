// Work-efficient column scan (Blelloch) in shared memory: a workgroup scans CBLOCK rows of 32
// neighbouring columns (elements), so each row segment it reads or writes is contiguous; each
// column of the tile sits in its own padded shared row (stride CBLOCK + 1). Every block writes its
// column totals to `sums` (scanned with the band carry by integral_block_sums).
#include "integral_common.glsl"

#define TX 32
#define TY 32
#define CBLOCK (2 * TY)
#define CSTRIDE (CBLOCK + 1)

layout(local_size_x = TX, local_size_y = TY) in;
layout(std430, binding = 0) buffer Table { uvec2 table[]; };
layout(std430, binding = 3) writeonly buffer Sums { uvec2 sums[]; };

uniform int u_cols;  // elements per row
uniform int u_rows;  // rows in the band

shared ACC s[TX * CSTRIDE];

void main() {
  int tx = int(gl_LocalInvocationID.x);
  int ty = int(gl_LocalInvocationID.y);
  uint k = gl_WorkGroupID.x * uint(TX) + uint(tx);
  int block = int(gl_WorkGroupID.y);
  int r0 = block * CBLOCK;
  bool col_ok = k < uint(u_cols);
  int col = tx * CSTRIDE;

  ACC orig[2];
  for (int h = 0; h < 2; ++h) {
    int r = ty + h * TY;
    ACC v = acc_zero();
    if (col_ok && r0 + r < u_rows) v = acc_load(table[uint(r0 + r) * uint(u_cols) + k]);
    orig[h] = v;
    s[col + r] = v;
  }

  int offset = 1;
  for (int d = CBLOCK >> 1; d > 0; d >>= 1) {
    memoryBarrierShared();
    barrier();
    if (ty < d) {
      int ai = offset * (2 * ty + 1) - 1;
      int bi = offset * (2 * ty + 2) - 1;
      s[col + bi] = acc_add(s[col + bi], s[col + ai]);
    }
    offset <<= 1;
  }
  memoryBarrierShared();
  barrier();
  if (ty == 0) {
    if (col_ok) sums[uint(block) * uint(u_cols) + k] = acc_store(s[col + CBLOCK - 1]);
    s[col + CBLOCK - 1] = acc_zero();
  }
  for (int d = 1; d < CBLOCK; d <<= 1) {
    offset >>= 1;
    memoryBarrierShared();
    barrier();
    if (ty < d) {
      int ai = offset * (2 * ty + 1) - 1;
      int bi = offset * (2 * ty + 2) - 1;
      ACC t = s[col + ai];
      s[col + ai] = s[col + bi];
      s[col + bi] = acc_add(s[col + bi], t);
    }
  }
  memoryBarrierShared();
  barrier();

  for (int h = 0; h < 2; ++h) {
    int r = ty + h * TY;
    if (col_ok && r0 + r < u_rows) {
      table[uint(r0 + r) * uint(u_cols) + k] = acc_store(acc_add(s[col + r], orig[h]));
    }
  }
}

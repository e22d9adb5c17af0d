// Shared-memory tile (the classic shared-memory average filter with an apron, in 2D): a 16x16 workgroup computes a 16x16 output
// tile. Its apron, (16 + 2rx) x (16 + 2ry) border-mapped samples, is loaded into shared memory
// once, in chunks of 16 rows x CW columns (so any radius fits); after a barrier each invocation
// sums its row's window from shared memory into a shared row sum, and then adds the row sums of
// the chunk that fall in its own vertical window. O(rx + ry) additions per pixel, each sample
// read from the texture once per tile.
#include "box_filter_common.glsl"

#define T 16
layout(local_size_x = T, local_size_y = T) in;

shared VEC s_src[T * CW];  // one chunk: T rows x CW columns of the apron
shared HSUM s_row[T * T];  // row sums of the chunk's rows for the tile's columns
shared uvec4 s_out[T * T];

void main() {
  int lx = int(gl_LocalInvocationID.x), ly = int(gl_LocalInvocationID.y);
  int tid = ly * T + lx;
  ivec2 tile = ivec2(gl_WorkGroupID.xy) * T;  // relative to the output tile
  ivec2 origin = u_tile0 + tile;              // image coordinates of this workgroup's pixel 0
  int apron_w = T + 2 * u_rx, apron_h = T + 2 * u_ry;
  VSUM acc = VSUM(0);

  for (int rc = 0; rc < apron_h; rc += T) {
    HSUM row = HSUM(0);
    for (int cc = 0; cc < apron_w; cc += CW) {
      barrier();
      for (int i = tid; i < T * CW; i += T * T) {
        int r = i / CW, q = i - r * CW;
        if (rc + r < apron_h && cc + q < apron_w) {
          s_src[i] = load_mapped(origin.x - u_rx + cc + q, origin.y - u_ry + rc + r);
        }
      }
      memoryBarrierShared();
      barrier();
      // Row ly of the chunk, output column lx: apron columns [lx, lx + 2rx] within this chunk.
      if (rc + ly < apron_h) {
        int q0 = max(lx, cc), q1 = min(lx + 2 * u_rx, min(cc + CW, apron_w) - 1);
        for (int q = q0; q <= q1; ++q) row += to_hsum(s_src[ly * CW + q - cc]);
      }
    }
    s_row[ly * T + lx] = row;
    memoryBarrierShared();
    barrier();
    // Output row ly needs apron rows [ly, ly + 2ry]; those in this chunk are [rc, rc + T).
    int r0 = max(ly, rc), r1 = min(ly + 2 * u_ry, min(rc + T, apron_h) - 1);
    for (int r = r0; r <= r1; ++r) acc += to_vsum(s_row[(r - rc) * T + lx]);
    barrier();
  }

  s_out[tid] = finish(acc);
  memoryBarrierShared();
  barrier();
  // 64 invocations write the tile, 4 neighbouring pixels (whole words) each.
  if (tid < T * T / 4) {
    int y = tid / (T / 4), x = (tid % (T / 4)) * 4;
    if (tile.y + y < u_tile_size.y && tile.x + x < u_tile_size.x) {
      int i = y * T + x;
      store4(tile.x + x, tile.y + y, s_out[i], s_out[i + 1], s_out[i + 2], s_out[i + 3]);
    }
  }
}

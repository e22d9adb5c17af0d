// Separable pass 1: horizontal window sums of the source rows [u_src_y0, u_src_y0 + u_src_rows)
// for the tile's columns, into `hsums` (row-major, CHANNELS per pixel: uint for integer images,
// double as two words for float images). One invocation runs along a segment of u_seg pixels of
// one row: one full window sum, then a running sum (add the entering sample, drop the leaving).
#include "box_filter_common.glsl"

layout(local_size_x = 8, local_size_y = 8) in;
layout(std430, binding = 1) writeonly buffer HSums { uint hsums[]; };

uniform int u_src_y0;
uniform int u_src_rows;
uniform int u_seg;

#define WS_T HSUM
#define WS_LOAD(i, e) to_hsum(load_mapped(i, e))
#define WS_N u_size.x
#include "box_filter_window.glsl"

void store_hsum(int r, int x, HSUM s) {
  uint i = (uint(r) * uint(u_tile_size.x) + uint(x)) * uint(CHANNELS);
  for (int c = 0; c < CHANNELS; ++c) {
#if defined(FMT_FLOAT)
    uvec2 w = unpackDouble2x32(s[c]);
    hsums[2u * (i + uint(c))] = w.x;
    hsums[2u * (i + uint(c)) + 1u] = w.y;
#else
    hsums[i + uint(c)] = s[c];
#endif
  }
}

void main() {
  int r = int(gl_GlobalInvocationID.y);
  int x = int(gl_GlobalInvocationID.x) * u_seg;
  if (r >= u_src_rows || x >= u_tile_size.x) return;
  int x_end = min(x + u_seg, u_tile_size.x);
  int y = u_src_y0 + r;
  int ox = u_tile0.x + x;
  HSUM s = window_sum(ox - u_rx, 2 * u_rx + 1, y);
  for (;;) {
    store_hsum(r, x, s);
    if (++x >= x_end) break;
    ++ox;
    if (ox - 1 - u_rx >= 0 && ox + u_rx < u_size.x) {  // inside: no border mapping
      s += to_hsum(load_texel(ivec2(ox + u_rx, y)));
      s -= to_hsum(load_texel(ivec2(ox - 1 - u_rx, y)));
    } else {
      s += to_hsum(load_mapped(ox + u_rx, y));
      s -= to_hsum(load_mapped(ox - 1 - u_rx, y));
    }
  }
}

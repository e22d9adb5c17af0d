// Separable pass 2: vertical running sums of the row sums, 4 neighbouring output columns per
// invocation (so that it writes whole words), along a segment of u_seg output rows; rows outside
// the image read the constant's row sum (kConstant) or their border-mapped row.
#include "box_filter_common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 1) readonly buffer HSums { uint hsums[]; };

uniform int u_src_y0;
uniform int u_seg;

VSUM load_v(int j, int px) {
  int m = map_index(j, u_size.y);
  if (m < 0) return to_vsum(to_hsum(VEC(u_const)) * HSUM(2 * u_rx + 1));
  uint i = (uint(m - u_src_y0) * uint(u_tile_size.x) + uint(px)) * uint(CHANNELS);
#if defined(FMT_FLOAT)
  double v[4] = double[4](0.0lf, 0.0lf, 0.0lf, 0.0lf);
  for (int c = 0; c < CHANNELS; ++c) {
    v[c] = packDouble2x32(uvec2(hsums[2u * (i + uint(c))], hsums[2u * (i + uint(c)) + 1u]));
  }
  return dvec4(v[0], v[1], v[2], v[3]);
#else
  uint v[4] = uint[4](0u, 0u, 0u, 0u);
  for (int c = 0; c < CHANNELS; ++c) v[c] = hsums[i + uint(c)];
  return to_vsum(uvec4(v[0], v[1], v[2], v[3]));
#endif
}

#define WS_T VSUM
#define WS_LOAD(i, e) load_v(i, e)
#define WS_N u_size.y
#include "box_filter_window.glsl"

void main() {
  int px0 = int(gl_GlobalInvocationID.x) * 4;
  int y = int(gl_GlobalInvocationID.y) * u_seg;
  if (px0 >= u_tile_size.x || y >= u_tile_size.y) return;
  int y_end = min(y + u_seg, u_tile_size.y);
  int cols[4];
  VSUM s[4];
  int oy = u_tile0.y + y;
  for (int p = 0; p < 4; ++p) {
    cols[p] = min(px0 + p, u_tile_size.x - 1);  // pixels past the tile only pad the row
    s[p] = window_sum(oy - u_ry, 2 * u_ry + 1, cols[p]);
  }
  for (;;) {
    store4(px0, y, finish(s[0]), finish(s[1]), finish(s[2]), finish(s[3]));
    if (++y >= y_end) break;
    ++oy;
    for (int p = 0; p < 4; ++p) {
      s[p] += load_v(oy + u_ry, cols[p]);
      s[p] -= load_v(oy - 1 - u_ry, cols[p]);
    }
  }
}

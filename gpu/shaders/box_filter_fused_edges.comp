// The side image of the fused strips at a row's ends (box_filter_fused_strips.comp): for every row
// of the image and every strip listed (the row's first u_left strips, then those from u_right0 on),
// the u_n texels that strip reads, built byte by byte from the border rule wherever they reach
// past the row's ends or into its partial last texel, copied otherwise. A few texels per row: the
// per-byte path that would cost the main pass two thirds of its time costs little here.
#include "box_filter_common.glsl"

layout(local_size_x = 8, local_size_y = 8) in;

layout(binding = 0, rgba32ui) readonly uniform uimage2D u_packed;
layout(binding = 1, rgba32ui) writeonly uniform uimage2D u_edges;

uniform int u_full_texels;  // texels wholly inside the row: bytes of a row / 16
uniform int u_n;            // texels a strip reads: [u_dx_a, u_dx_a + u_split) and
uniform int u_split;        // [u_dx_b, u_dx_b + u_n - u_split) from its first output texel
uniform int u_dx_a;
uniform int u_dx_b;
uniform int u_strip;        // output texels per strip
uniform int u_left;         // strips listed from the row's start
uniform int u_right0;       // the first strip listed after those
uniform int u_count;        // strips listed

void main() {
  int e = int(gl_GlobalInvocationID.x), y = int(gl_GlobalInvocationID.y);
  if (e >= u_count * u_n || y >= u_size.y) return;
  int k = e / u_n;
  int strip = k < u_left ? k : u_right0 + k - u_left;
  int t = e - k * u_n;
  int tx = strip * u_strip + (t < u_split ? u_dx_a + t : u_dx_b + t - u_split);  // extended row
  uvec4 r = uvec4(0);
  if (tx >= 0 && tx < u_full_texels) {
    r = imageLoad(u_packed, ivec2(tx, y));
  } else {
    for (int j = 0; j < 16; ++j) {
      int b = 16 * tx + j;  // byte of the extended row
      int px = b >= 0 ? b / CHANNELS : -((CHANNELS - 1 - b) / CHANNELS);
      int m = map_index(px, u_size.x);
      uint v = u_const;
      if (m >= 0) {
        int src = m * CHANNELS + (b - px * CHANNELS);
        v = bitfieldExtract(imageLoad(u_packed, ivec2(src >> 4, y))[(src >> 2) & 3],
                            8 * (src & 3), 8);
      }
      r[j >> 2] |= v << uint(8 * (j & 3));
    }
  }
  imageStore(u_edges, ivec2(e, y), r);
}

// The side image of the fused strips at a row's ends (box_filter_fused_strips.comp): its texels
// that reach past the row's ends or into its partial last texel, built byte by byte from the
// border rule for every row (the texels wholly inside the row are copied in by the caller).
// One invocation per row, so that the eight rows of a SIMD group share each texel's path: with
// one per texel, llvmpipe (which runs both sides of a branch for every lane) paid the per-byte path
// in nearly every group.
#include "box_filter_common.glsl"

layout(local_size_x = 8) in;

layout(binding = 0, rgba32ui) readonly uniform uimage2D u_packed;
layout(binding = 1, rgba32ui) writeonly uniform uimage2D u_edges;
layout(std430, binding = 2) readonly buffer ByteTexels {
  ivec2 u_texels[];  // (side image texel, texel of the row extended past its ends)
};

uniform int u_count;  // entries of u_texels

void main() {
  int y = int(gl_GlobalInvocationID.x);
  if (y >= u_size.y) return;
  for (int i = 0; i < u_count; ++i) {
    int tx = u_texels[i].y;
    uvec4 r = uvec4(0);
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
    imageStore(u_edges, ivec2(u_texels[i].x, y), r);
  }
}

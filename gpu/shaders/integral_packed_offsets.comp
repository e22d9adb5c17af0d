// Packed-strip variant, pass 1: one invocation per row sums the row strip by strip and writes,
// per strip and channel, the sum of the row before the strip (an exclusive prefix over strips).
// The padding of the packed rows is zero, so it adds nothing.
#include "integral_common.glsl"
#include "integral_packed_common.glsl"

layout(local_size_x = 8) in;
layout(std430, binding = 3) writeonly buffer Sums { uvec2 sums[]; };

void main() {
  int r = int(gl_GlobalInvocationID.x);
  if (r >= u_rows) return;
  ACC run[CHANNELS];
  for (int c = 0; c < CHANNELS; ++c) run[c] = acc_zero();
  uint base = uint(r) * uint(u_nstrips) * uint(CHANNELS);
  ivec2 p = ivec2(u_origin.x, u_origin.y + r);
  for (int s = 0; s < u_nstrips; ++s) {
    for (int c = 0; c < CHANNELS; ++c) sums[base + uint(s * CHANNELS + c)] = acc_store(run[c]);
    for (int t = 0; t < TEXELS; ++t, ++p.x) {
      uvec4 v = imageLoad(u_packed, p);
      for (int k = 0; k < SPT; ++k) {
        int c = (t * SPT + k) % CHANNELS;
        run[c] = acc_add(run[c], texel_sample(v, k));
      }
    }
  }
}

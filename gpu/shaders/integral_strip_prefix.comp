// Strip-scan variant, pass 1: one invocation per row sums the row strip by strip (STRIP pixels
// each) and writes, per strip, the sum of the row before it (an exclusive prefix over strips).
#include "integral_common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 3) writeonly buffer Sums { uvec2 sums[]; };

uniform ivec2 u_origin;
uniform int u_width;
uniform int u_rows;
uniform int u_nstrips;

void main() {
  int r = int(gl_GlobalInvocationID.x);
  if (r >= u_rows) return;
  ACC run[CHANNELS];
  for (int c = 0; c < CHANNELS; ++c) run[c] = acc_zero();
  uint base = uint(r) * uint(u_nstrips) * uint(CHANNELS);
  for (int s = 0; s < u_nstrips; ++s) {
    for (int c = 0; c < CHANNELS; ++c) sums[base + uint(s * CHANNELS + c)] = acc_store(run[c]);
    int x0 = s * STRIP;
    for (int k = 0; k < STRIP; ++k) {
      if (x0 + k < u_width) {
        TEXEL_T t = load_texel(u_origin + ivec2(x0 + k, r));
        for (int c = 0; c < CHANNELS; ++c) run[c] = acc_add(run[c], acc_sample(t[c]));
      }
    }
  }
}

// Naive row pass: one invocation scans one row of the rectangle sequentially, all channels.
#include "integral_common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer Table { uvec2 table[]; };

uniform ivec2 u_origin;  // image coordinates of the rectangle's first pixel of this band
uniform int u_width;     // pixels per row
uniform int u_rows;      // rows in this band

void main() {
  int r = int(gl_GlobalInvocationID.x);
  if (r >= u_rows) return;
  ACC s[CHANNELS];
  for (int c = 0; c < CHANNELS; ++c) s[c] = acc_zero();
  uint base = uint(r) * uint(u_width) * uint(CHANNELS);
  for (int x = 0; x < u_width; ++x) {
    TEXEL_T t = load_texel(u_origin + ivec2(x, r));
    for (int c = 0; c < CHANNELS; ++c) {
      s[c] = acc_add(s[c], acc_sample(t[c]));
      table[base + uint(x * CHANNELS + c)] = acc_store(s[c]);
    }
  }
}

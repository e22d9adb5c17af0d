// Strip-scan variant, pass 2: one invocation owns a strip of STRIP columns and walks down the
// band, keeping the strip's previous table row in registers: for each row it adds the samples to
// the strip's row offset (pass 1) and that running row sum to the row above. The table is written
// once and never read back (the naive variant writes it twice and reads it once).
#include "integral_common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer Table { uvec2 table[]; };
layout(std430, binding = 1) readonly buffer CarryIn { uvec2 carry_in[]; };
layout(std430, binding = 2) writeonly buffer CarryOut { uvec2 carry_out[]; };
layout(std430, binding = 3) readonly buffer Sums { uvec2 sums[]; };

uniform ivec2 u_origin;
uniform int u_width;
uniform int u_rows;
uniform int u_nstrips;
uniform bool u_use_carry;

void main() {
  int s = int(gl_GlobalInvocationID.x);
  if (s >= u_nstrips) return;
  int x0 = s * STRIP;
  int n = min(STRIP, u_width - x0);
  ACC prev[STRIP * CHANNELS];
  for (int k = 0; k < STRIP; ++k) {
    for (int c = 0; c < CHANNELS; ++c) {
      prev[k * CHANNELS + c] = (u_use_carry && k < n)
                                   ? acc_load(carry_in[uint((x0 + k) * CHANNELS + c)])
                                   : acc_zero();
    }
  }
  for (int r = 0; r < u_rows; ++r) {
    ACC run[CHANNELS];
    uint srow = (uint(r) * uint(u_nstrips) + uint(s)) * uint(CHANNELS);
    for (int c = 0; c < CHANNELS; ++c) run[c] = acc_load(sums[srow + uint(c)]);
    uint row = (uint(r) * uint(u_width) + uint(x0)) * uint(CHANNELS);
    for (int k = 0; k < STRIP; ++k) {
      if (k < n) {
        TEXEL_T t = load_texel(u_origin + ivec2(x0 + k, r));
        for (int c = 0; c < CHANNELS; ++c) {
          run[c] = acc_add(run[c], acc_sample(t[c]));
          prev[k * CHANNELS + c] = acc_add(prev[k * CHANNELS + c], run[c]);
          table[row + uint(k * CHANNELS + c)] = acc_store(prev[k * CHANNELS + c]);
        }
      }
    }
  }
  for (int k = 0; k < STRIP; ++k) {
    for (int c = 0; c < CHANNELS; ++c) {
      if (k < n) carry_out[uint((x0 + k) * CHANNELS + c)] = acc_store(prev[k * CHANNELS + c]);
    }
  }
}

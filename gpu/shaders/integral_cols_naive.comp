// Naive column pass: one invocation scans one column (one channel of one x) of the band down,
// starting from the previous band's last row (the carry). Neighbouring invocations touch
// neighbouring elements, so every row access is coalesced.
#include "integral_common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Table { uvec2 table[]; };
layout(std430, binding = 1) readonly buffer CarryIn { uvec2 carry_in[]; };
layout(std430, binding = 2) writeonly buffer CarryOut { uvec2 carry_out[]; };

uniform int u_cols;  // elements per row: width * channels
uniform int u_rows;
uniform bool u_use_carry;

void main() {
  uint k = gl_GlobalInvocationID.x;
  if (k >= uint(u_cols)) return;
  ACC s = u_use_carry ? acc_load(carry_in[k]) : acc_zero();
  for (int r = 0; r < u_rows; ++r) {
    uint i = uint(r) * uint(u_cols) + k;
    s = acc_add(s, acc_load(table[i]));
    table[i] = acc_store(s);
  }
  carry_out[k] = acc_store(s);
}

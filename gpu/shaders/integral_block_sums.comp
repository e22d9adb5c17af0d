// Exclusive scan of block totals, one invocation per line (one channel of one row or column),
// starting from the line's carry when given; the line's grand total becomes the next carry.
// Line l's totals sit at base + b * stride, base = (l / div) * mul + l % div.
#include "integral_common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 1) readonly buffer CarryIn { uvec2 carry_in[]; };
layout(std430, binding = 2) writeonly buffer CarryOut { uvec2 carry_out[]; };
layout(std430, binding = 3) buffer Sums { uvec2 sums[]; };

uniform uint u_lines;
uniform uint u_div;
uniform uint u_mul;
uniform uint u_stride;
uniform int u_nblocks;
uniform bool u_use_carry;
uniform bool u_write_carry;

void main() {
  uint l = gl_GlobalInvocationID.x;
  if (l >= u_lines) return;
  uint base = (l / u_div) * u_mul + l % u_div;
  ACC run = u_use_carry ? acc_load(carry_in[l]) : acc_zero();
  for (int b = 0; b < u_nblocks; ++b) {
    uint i = base + uint(b) * u_stride;
    ACC t = acc_load(sums[i]);
    sums[i] = acc_store(run);
    run = acc_add(run, t);
  }
  if (u_write_carry) carry_out[l] = acc_store(run);
}

// Packed-strip variant, pass 2: one invocation owns NS sample columns and walks down the band
// keeping the strip's previous table row in registers. Per row it loads the strip's texels, adds
// the samples to the strip's row offset (pass 1) and that running sum to the row above, and
// writes the row. Where rows are a whole number of 4-element groups (u_vec4_rows) it writes four
// elements per store: CPU renderers run every storage access as a loop over the SIMD lanes, so
// four elements per access instead of one is what makes this pass fast there. With ACC_U32 the
// elements are 4 bytes: half the bytes to store, and 32-bit adds.
#include "integral_common.glsl"
#include "integral_packed_common.glsl"

layout(local_size_x = 8) in;
#if defined(ACC_U32)
// 4-byte table elements, each mod 2^32 (the C++ side rebuilds the 8-byte rows as it reads them).
layout(std430, binding = 0) writeonly buffer Table { uint table[]; };
layout(std430, binding = 0) writeonly buffer Table4 { uvec4 table4[]; };
#if defined(HAVE_INT64)
// The same four elements as two 64-bit components (as_u64_pair, prelude.glsl).
layout(std430, binding = 0) writeonly buffer Table8 { u64vec2 table8[]; };
#endif
uint table_elem(ACC a) { return a; }
#define VEC4_STORES 1
#define ACC4 uvec4
#else
layout(std430, binding = 0) writeonly buffer Table { uvec2 table[]; };
uvec2 table_elem(ACC a) { return acc_store(a); }
#if defined(ACC_DOUBLE)
layout(std430, binding = 0) writeonly buffer Table4 { dvec4 table4[]; };
#define VEC4_STORES 1
#define ACC4 dvec4
#elif defined(HAVE_INT64) && !defined(FORCE_TWO_WORD)
layout(std430, binding = 0) writeonly buffer Table4 { u64vec4 table4[]; };
#define VEC4_STORES 1
#define ACC4 u64vec4
#endif
#endif
layout(std430, binding = 1) readonly buffer CarryIn { uvec2 carry_in[]; };
layout(std430, binding = 2) writeonly buffer CarryOut { uvec2 carry_out[]; };
layout(std430, binding = 3) readonly buffer Sums { uvec2 sums[]; };

uniform int u_row_samples;  // table elements per row: width * CHANNELS
uniform bool u_use_carry;
uniform bool u_vec4_rows;   // u_row_samples % 4 == 0

void main() {
  int s = int(gl_GlobalInvocationID.x);
  if (s >= u_nstrips) return;
  int j0 = s * NS;
  int n = min(NS, u_row_samples - j0);  // columns of the strip inside the rectangle
  ACC prev[NS];
  for (int i = 0; i < NS; ++i) {
    prev[i] = (u_use_carry && i < n) ? acc_load(carry_in[uint(j0 + i)]) : acc_zero();
  }
  bool vec4_stores = u_vec4_rows && n == NS;
  for (int r = 0; r < u_rows; ++r) {
    ACC run[CHANNELS];
    uint srow = (uint(r) * uint(u_nstrips) + uint(s)) * uint(CHANNELS);
    for (int c = 0; c < CHANNELS; ++c) run[c] = acc_load(sums[srow + uint(c)]);
    ivec2 p = ivec2(u_origin.x + s * TEXELS, u_origin.y + r);
    for (int t = 0; t < TEXELS; ++t) {
      uvec4 v = imageLoad(u_packed, p + ivec2(t, 0));
      for (int k = 0; k < SPT; ++k) {
        int c = (t * SPT + k) % CHANNELS;
        run[c] = acc_add(run[c], texel_sample(v, k));
        prev[t * SPT + k] = acc_add(prev[t * SPT + k], run[c]);
      }
    }
    uint row = uint(r) * uint(u_row_samples) + uint(j0);
#if defined(VEC4_STORES)
    if (vec4_stores) {
      for (int q = 0; q < NS / 4; ++q) {
#if defined(ACC_U32) && defined(HAVE_INT64)
        table8[(row >> 2) + uint(q)] =
            as_u64_pair(uvec4(prev[4 * q], prev[4 * q + 1], prev[4 * q + 2], prev[4 * q + 3]));
#else
        table4[(row >> 2) + uint(q)] =
            ACC4(prev[4 * q], prev[4 * q + 1], prev[4 * q + 2], prev[4 * q + 3]);
#endif
      }
    } else {
#endif
      // Four per iteration: llvmpipe ends a loop nest after 65535 iterations in all, so the rows
      // of a dispatch times this loop's iterations must stay below that (the C++ side caps the
      // rows); the loops over texels and samples are unrolled.
      for (int q = 0; q < NS / 4; ++q) {
        for (int k = 0; k < 4; ++k) {
          if (4 * q + k < n) table[row + uint(4 * q + k)] = table_elem(prev[4 * q + k]);
        }
      }
#if defined(VEC4_STORES)
    }
#endif
  }
  for (int i = 0; i < NS; ++i) {
    if (i < n) carry_out[uint(j0 + i)] = acc_store(prev[i]);
  }
}

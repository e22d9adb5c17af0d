// Shared by the box-filter shaders. Defines from the C++ side: the image's (FMT_UINT | FMT_FLOAT,
// CHANNELS, SAMPLE_BITS) and WIDE (integer window sums may reach 2^32: double accumulators, exact
// below 2^53). Pixels are handled as 4-vectors whatever CHANNELS (unused lanes are ignored).
// Every variant writes its output tile as packed words in ImageDesc layout, rows of u_out_pitch
// pixels (a multiple of 4, so that 4 neighbouring pixels fill whole words).

// u_border: the C++ side maps BorderMode to these (box_filter_internal::ShaderBorder).
#define BORDER_REPLICATE 0
#define BORDER_REFLECT101 1
#define BORDER_CONSTANT 2

layout(std430, binding = 0) writeonly buffer Out { uint out_words[]; };

uniform ivec2 u_size;       // image size
uniform ivec2 u_tile0;      // image coordinates of the output tile's first pixel
uniform ivec2 u_tile_size;  // output tile size
uniform int u_out_pitch;    // pixels per row of the output tile buffer
uniform int u_rx;
uniform int u_ry;
uniform int u_border;
uniform uint u_area;      // (2rx+1)(2ry+1) < 2^32
uniform double u_area_d;  // the same
// SAMPLE_BITS again, as a uniform: the shift that packs samples into a stored word. llvmpipe stores
// to a storage buffer one SIMD lane at a time, and LLVM recomputes inside that per-lane loop every
// operation feeding the stored value that has a constant operand (it scalarizes the extract of a
// lane through such operations), so packing with constant shifts ran as about ten scalar
// instructions per word and lane; shifts by a uniform stay vector operations, done once for all
// lanes (bench/results/box_filter_llvmpipe.md: 14-23% fewer instructions in the fused pass).
uniform uint u_sample_bits;

#if defined(FMT_UINT)
#define VEC uvec4
#define HSUM uvec4  // a row sum: at most 65535 * 65535 < 2^32
uniform uint u_const;
#else
#define VEC vec4
#define HSUM dvec4
uniform float u_const;
#endif
#if defined(FMT_FLOAT) || defined(WIDE)
#define VSUM dvec4
#else
#define VSUM uvec4
#endif
// Sums widen their terms with widen_d (prelude.glsl), never with a plain conversion.
#if defined(FMT_UINT)
HSUM to_hsum(uvec4 v) { return v; }
#else
HSUM to_hsum(vec4 v) { return widen_d4(v); }
#endif
#if defined(WIDE) && !defined(FMT_FLOAT)
VSUM to_vsum(HSUM h) { return widen_d4(h); }
#else
VSUM to_vsum(HSUM h) { return h; }
#endif
// A double vector is never written one lane at a dynamic index: NVIDIA's GLSL compiler (driver
// 580) fails to link that ("can't find __setVectorIndex function in stdlib"). Lanes are gathered
// in an array and the vector is made from it (box_filter_sep_cols.comp, box_filter_integral.comp).

// OpenCV's borderInterpolate: the image index that extended index i reads, or -1 (constant).
int map_index(int i, int n) {
  if (i >= 0 && i < n) return i;
  if (u_border == BORDER_REPLICATE) return clamp(i, 0, n - 1);
  if (u_border == BORDER_REFLECT101) {
    if (n == 1) return 0;
    int p = 2 * n - 2;  // reflect-101 repeats with this period
    // i mod p without an integer division (llvmpipe runs those lane by lane): the float
    // quotient of integers below 2^24 is off by at most one, which the two steps correct.
    int m = i - p * int(floor(float(i) / float(p)));
    m += m < 0 ? p : 0;
    m -= m >= p ? p : 0;
    return m < n ? m : p - m;
  }
  return -1;
}

VEC load_mapped(int x, int y) {
  int mx = map_index(x, u_size.x), my = map_index(y, u_size.y);
  if (mx < 0 || my < 0) return VEC(u_const);
  return load_texel(ivec2(mx, my));
}

// The output samples (values, or float bits) of a window sum.
uvec4 finish(VSUM s) {
#if defined(FMT_FLOAT)
  precise dvec4 m = s / u_area_d;
  return floatBitsToUint(vec4(m));
#elif defined(WIDE)
  // floor(s / a + 1/2) exactly: every value is an integer below 2^53.
  uvec4 r;
  for (int c = 0; c < 4; ++c) {
    precise double q = floor(s[c] / u_area_d);
    precise double rem = s[c] - q * u_area_d;
    if (rem < 0.0lf) {
      q -= 1.0lf;
      rem += u_area_d;
    } else if (rem >= u_area_d) {
      q += 1.0lf;
      rem -= u_area_d;
    }
    r[c] = uint(q) + (2.0lf * rem >= u_area_d ? 1u : 0u);
  }
  return r;
#else
  uvec4 q = s / u_area;
  uvec4 rem = s - q * u_area;
  return q + uvec4(greaterThanEqual(rem, uvec4(u_area) - rem));
#endif
}

// Stores 4 neighbouring pixels of the tile from (x, y) on, x a multiple of 4.
void store4(int x, int y, uvec4 p0, uvec4 p1, uvec4 p2, uvec4 p3) {
  uint s[16];
  uvec4 px[4] = uvec4[4](p0, p1, p2, p3);
  for (int p = 0; p < 4; ++p) {
    for (int c = 0; c < CHANNELS; ++c) s[p * CHANNELS + c] = px[p][c];
  }
  uint w0 = (uint(y) * uint(u_out_pitch) + uint(x)) * uint(CHANNELS) * uint(SAMPLE_BITS / 8) / 4u;
#if SAMPLE_BITS == 8
  for (int w = 0; w < CHANNELS; ++w) {
    out_words[w0 + uint(w)] = s[4 * w] | (s[4 * w + 1] << u_sample_bits) |
                              (s[4 * w + 2] << 2u * u_sample_bits) |
                              (s[4 * w + 3] << 3u * u_sample_bits);
  }
#elif SAMPLE_BITS == 16
  for (int w = 0; w < 2 * CHANNELS; ++w) {
    out_words[w0 + uint(w)] = s[2 * w] | (s[2 * w + 1] << u_sample_bits);
  }
#else
  for (int w = 0; w < 4 * CHANNELS; ++w) out_words[w0 + uint(w)] = s[w];
#endif
}

// Shared by every Glimpse compute shader; prepended after the #version line and the defines.
// The input image is bound to texture unit 0 and read with texelFetch (exact, no filtering).
#if defined(PACKED_IMAGE)
// Or, for programs written for the texture that run where an upload makes only the image's packed
// form (CPU renderers: gpu/image.h), from that form at image unit 0: the rows' raw bytes, 16 per
// RGBA32UI texel, read a sample at a time. Needs CHANNELS and SAMPLE_BITS.
layout(binding = 0, rgba32ui) readonly uniform uimage2D u_packed;
// The samples' bits of pixel p, channels past CHANNELS zero.
uvec4 packed_bits(ivec2 p) {
  uvec4 t = uvec4(0u);
  for (int c = 0; c < CHANNELS; ++c) {
    uint bit = uint(p.x * CHANNELS + c) * uint(SAMPLE_BITS);
    uint w = imageLoad(u_packed, ivec2(int(bit >> 7), p.y))[(bit >> 5) & 3u];
#if SAMPLE_BITS < 32
    t[c] = bitfieldExtract(w, int(bit & 31u), SAMPLE_BITS);
#else
    t[c] = w;
#endif
  }
  return t;
}
#if defined(FMT_UINT)
uvec4 load_texel(ivec2 p) { return packed_bits(p); }
#else
vec4 load_texel(ivec2 p) { return uintBitsToFloat(packed_bits(p)); }
#endif
#elif defined(FMT_UINT)
layout(binding = 0) uniform usampler2D u_image;
uvec4 load_texel(ivec2 p) { return texelFetch(u_image, p, 0); }
#elif defined(FMT_FLOAT)
layout(binding = 0) uniform sampler2D u_image;
vec4 load_texel(ivec2 p) { return texelFetch(u_image, p, 0); }
#endif

#if defined(HAVE_INT64)
// A texel of four 32-bit words as two 64-bit components, for storage buffers declared so: llvmpipe
// runs a storage-buffer store as a loop over the SIMD lanes, one scalar store per component and
// lane, so two 64-bit components take half the scalar stores of four 32-bit ones.
u64vec2 as_u64_pair(uvec4 v) { return u64vec2(packUint2x32(v.xy), packUint2x32(v.zw)); }
#endif

// Exact widening to 8-byte values that a compiler cannot narrow. On an H100 (driver 580) float
// samples entered double sums as float-precision values and squares of 16-bit samples summed
// modulo 2^32 in some kernels, as if double(a) + double(b) of floats a, b were double(a + b) and
// likewise for uint64_t(a) of 32-bit a; tests/gpu/arithmetic_test.cc checks each formulation on
// the device. The values below are the same numbers, made from their bits with a term the
// compiler cannot know to be 0, so no narrower operation hides in them.
// That term: a uniform no program sets (linking initializes every uniform to 0), so the compiler
// cannot fold it as it may gl_NumWorkGroups.x == 0u (no dispatch has 0 workgroups).
uniform uint u_opaque_zero;
uint opaque_zero() { return u_opaque_zero; }
// m * 2^p exactly, for m > 0 and a normal double result.
double scaled_double(uint m, int p) {
  int top = findMSB(m);
  uint rest = m ^ (1u << uint(top));  // the significand's bits below the leading one
  uint hi = top <= 20 ? rest << uint(20 - top) : rest >> uint(top - 20);
  uint lo = top <= 20 ? 0u : rest << uint(52 - top);
  return packDouble2x32(uvec2(lo, hi | (uint(1023 + top + p) << 20)));
}
double widen_d(float v) {
  uint b = floatBitsToUint(v);
  uint sign = b & 0x80000000u, e = (b >> 23) & 0xffu, m = b & 0x7fffffu;
  if (e == 0u) {  // zero, or subnormal: m * 2^-149
    double d = m == 0u ? packDouble2x32(uvec2(0u, 0u)) : scaled_double(m, -149);
    return sign != 0u ? -d : d;
  }
  uint exponent = e == 255u ? 2047u : e + 896u + opaque_zero();  // infinities and NaN stay so
  return packDouble2x32(uvec2(m << 29, sign | (exponent << 20) | (m >> 3)));
}
#if defined(HAVE_INT64)
uint64_t widen_u64(uint v) { return packUint2x32(uvec2(v, opaque_zero())); }
double widen_d(uint v) { return double(widen_u64(v)); }
#else
double widen_d(uint v) { return v == 0u ? double(opaque_zero()) : scaled_double(v, 0); }
#endif
dvec4 widen_d4(vec4 v) { return dvec4(widen_d(v.x), widen_d(v.y), widen_d(v.z), widen_d(v.w)); }
dvec4 widen_d4(uvec4 v) { return dvec4(widen_d(v.x), widen_d(v.y), widen_d(v.z), widen_d(v.w)); }

// OpenCV's COLOR_RGB2GRAY for integer data: (9798 R + 19235 G + 3735 B + 16384) >> 15.
uint luma_u(uvec3 rgb) { return (9798u * rgb.r + 19235u * rgb.g + 3735u * rgb.b + 16384u) >> 15; }

// Luma and mean of float RGB: 0.299 R + 0.587 G + 0.114 B and (R + G + B) * (1/3) in float, each
// operation rounded once (precise: no fused multiply-add), every input and result below the
// smallest normal float taken as 0. Devices that flush subnormals to zero and those that keep them
// so give the same value (NVIDIA's driver flushed them in one compaction program and not in the
// others). gpu/reference/float_color.h is the CPU's.
float flush_subnormal(float v) { return abs(v) < 1.17549435e-38 ? 0.0 : v; }
float luma_f(vec3 rgb) {
  precise float r = 0.299 * flush_subnormal(rgb.r);
  precise float g = 0.587 * flush_subnormal(rgb.g);
  precise float b = 0.114 * flush_subnormal(rgb.b);
  precise float rg = flush_subnormal(r) + flush_subnormal(g);
  precise float y = flush_subnormal(rg) + flush_subnormal(b);
  return flush_subnormal(y);
}
float mean_f(vec3 rgb) {
  precise float rg = flush_subnormal(rgb.r) + flush_subnormal(rgb.g);
  precise float sum = flush_subnormal(rg) + flush_subnormal(rgb.b);
  precise float m = flush_subnormal(sum) * (1.0 / 3.0);
  return flush_subnormal(m);
}

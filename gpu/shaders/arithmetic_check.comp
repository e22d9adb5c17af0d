// The device's arithmetic as the kernels rely on it, checked by tests/gpu/arithmetic_test.cc:
// 8-byte sums and products of widened 32-bit samples, and float luma near zero. One invocation
// reads its operands' bits from `operands` and writes each result's bits to `results`; the test
// compares them with the CPU's, bit for bit. Besides the prelude's widening (which the kernels
// use), the plain conversions are computed too, so that a failure shows which formulation a
// driver's compiler narrows (a GPU's compiler may rewrite double(a) + double(b) of floats as
// double(a + b), and likewise for 64-bit integers).
// Defines: FORMULATION 0 (plain conversions double(v), uint64_t(v)), 1 (the prelude's widen_d,
// widen_u64), 2 (the 8-byte values read from memory, made on the CPU); PRECISE (the results
// declared precise).
layout(local_size_x = 1) in;

layout(std430, binding = 0) readonly buffer Operands {
  // [0], [1]: floats a, b; [2], [3]: 32-bit integers x, y; [4..7]: double(a), double(b) as
  // (lo, hi) words; [8..11]: uint64 x and y likewise; [12..14]: r, g, b of a float pixel.
  uint operands[];
};
layout(std430, binding = 1) writeonly buffer Results { uvec2 results[]; };

#if defined(PRECISE)
#define P precise
#else
#define P
#endif

double wide_f(int i) {
  float v = uintBitsToFloat(operands[i]);
#if FORMULATION == 0
  return double(v);
#elif FORMULATION == 1
  return widen_d(v);
#else
  return packDouble2x32(uvec2(operands[4 + 2 * i], operands[5 + 2 * i]));
#endif
}

#if defined(HAVE_INT64)
uint64_t wide_u(int i) {
  uint v = operands[2 + i];
#if FORMULATION == 0
  return uint64_t(v);
#elif FORMULATION == 1
  return widen_u64(v);
#else
  return packUint2x32(uvec2(operands[8 + 2 * (i)], operands[9 + 2 * (i)]));
#endif
}
#endif

void main() {
  double a = wide_f(0), b = wide_f(1);
  P double sum = a + b;
  P double square = a * a;
  P double sum_of_squares = a * a + b * b;
  results[0] = unpackDouble2x32(sum);
  results[1] = unpackDouble2x32(square);
  results[2] = unpackDouble2x32(sum_of_squares);
#if defined(HAVE_INT64)
  uint64_t x = wide_u(0), y = wide_u(1);
  P uint64_t usum = x + y;
  uint64_t shifted = 0ul;  // x << b summed over b = 0..31: x * (2^32 - 1)
  for (int s = 0; s < 32; ++s) shifted += x << uint(s);
  uint64_t xsq = wide_u(0) * wide_u(0);
  results[3] = unpackUint2x32(usum);
  results[4] = unpackUint2x32(shifted);
  results[5] = unpackUint2x32(xsq);
#else
  results[3] = results[4] = results[5] = uvec2(0u);
#endif
  // Float luma (one float, bits in .x): as written plainly, which a device that flushes
  // subnormals computes differently, and as the kernels compute it (luma_f), which it may not.
  vec3 rgb = uintBitsToFloat(uvec3(operands[12], operands[13], operands[14]));
  precise float luma = 0.299 * rgb.r + 0.587 * rgb.g + 0.114 * rgb.b;
  results[6] = uvec2(floatBitsToUint(luma), 0u);
  results[7] = uvec2(floatBitsToUint(luma_f(rgb)), 0u);
}

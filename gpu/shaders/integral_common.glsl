// Shared by the integral-image shaders: the 8-byte table element and its arithmetic.
// Defines from the C++ side: ACC_DOUBLE (float images: double sums), SQUARED (sum v*v),
// FORCE_TWO_WORD (64-bit integers as two 32-bit words with a carry, even with int64), ACC_U32
// (32-bit sums that wrap: every element mod 2^32, which the C++ side rebuilds exactly row by row),
// CHANNELS. Offsets and carries are stored as uvec2 (little-endian 8 bytes: lo word, hi word)
// whatever the arithmetic; so are tables, but for ACC_U32 tables (4-byte elements).

#if defined(ACC_DOUBLE)
#define ACC double
ACC acc_zero() { return 0.0lf; }
ACC acc_add(ACC a, ACC b) {
  precise ACC r = a + b;
  return r;
}
ACC acc_load(uvec2 e) { return packDouble2x32(e); }
uvec2 acc_store(ACC a) { return unpackDouble2x32(a); }
#elif defined(ACC_U32)
#define ACC uint
ACC acc_zero() { return 0u; }
ACC acc_add(ACC a, ACC b) { return a + b; }
ACC acc_load(uvec2 e) { return e.x; }
uvec2 acc_store(ACC a) { return uvec2(a, 0u); }
#elif defined(HAVE_INT64) && !defined(FORCE_TWO_WORD)
#define ACC uint64_t
ACC acc_zero() { return 0ul; }
ACC acc_add(ACC a, ACC b) { return a + b; }
ACC acc_load(uvec2 e) { return packUint2x32(e); }
uvec2 acc_store(ACC a) { return unpackUint2x32(a); }
#else
#define ACC uvec2
ACC acc_zero() { return uvec2(0u); }
ACC acc_add(ACC a, ACC b) {
  uint carry;
  uint lo = uaddCarry(a.x, b.x, carry);
  return uvec2(lo, a.y + b.y + carry);
}
ACC acc_load(uvec2 e) { return e; }
uvec2 acc_store(ACC a) { return a; }
#endif

#if defined(FMT_UINT)
#define TEXEL_T uvec4
#elif defined(FMT_FLOAT)
#define TEXEL_T vec4
#endif

#if defined(FMT_FLOAT)
ACC acc_sample(float v) {
  double d = widen_d(v);  // not double(v): see widen_d in prelude.glsl
#if defined(SQUARED)
  precise double sq = d * d;  // exact: a 24-bit significand squared fits in 53 bits
  return sq;
#else
  return d;
#endif
}
#elif defined(FMT_UINT)
ACC acc_sample(uint v) {
#if defined(SQUARED)
  v = v * v;  // 65535^2 < 2^32
#endif
#if defined(ACC_DOUBLE)
  return widen_d(v);
#elif defined(ACC_U32)
  return v;
#elif defined(HAVE_INT64) && !defined(FORCE_TWO_WORD)
  return widen_u64(v);
#else
  return uvec2(v, 0u);
#endif
}
#endif

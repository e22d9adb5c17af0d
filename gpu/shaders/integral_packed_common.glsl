// Shared by the packed-strip integral shaders (CPU renderers): the image is read from its packed
// form, 16 bytes of a row per image load, and each invocation owns a strip of NS sample columns:
// whole texels (TEXELS = NS / SPT of them) holding whole pixels (NS is a multiple of CHANNELS), so
// the channel of the strip's sample i is i % CHANNELS.
// Defines from the C++ side: the image's (FMT_*, CHANNELS, SAMPLE_BITS), the accumulator's
// (integral_common.glsl), NS.
// REQUIRES: integral_common.glsl included before.

layout(binding = 0, rgba32ui) readonly uniform uimage2D u_packed;

#define SPT (128 / SAMPLE_BITS)  // samples per 16-byte texel
#define TEXELS (NS / SPT)

uniform ivec2 u_origin;  // packed texel x of the rectangle's first column, image row of the band
uniform int u_rows;      // rows in this band
uniform int u_nstrips;   // strips per row

// Sample k (0 <= k < SPT) of a packed texel, in row order.
ACC texel_sample(uvec4 t, int k) {
#if SAMPLE_BITS == 8
  return acc_sample(bitfieldExtract(t[k >> 2], 8 * (k & 3), 8));
#elif SAMPLE_BITS == 16
  return acc_sample(bitfieldExtract(t[k >> 1], 16 * (k & 1), 16));
#else
  return acc_sample(uintBitsToFloat(t[k]));
#endif
}

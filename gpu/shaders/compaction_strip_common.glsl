// Shared by the strip-scan compaction shaders (CPU renderers): the image is read from its packed
// form (16 bytes of a row per image load) and cut into segments of 32 pixels of one row, each
// invocation taking 4 segments (a group). Only layouts of 1, 2 or 4 bytes per pixel, so that every
// 32-bit word holds whole pixels (PPW of them) and the selected sample of pixel j of a word sits
// at a shift that is a constant plus the uniform channel's offset.
// Defines: the image's (FMT_*, CHANNELS, SAMPLE_BITS), SOURCE_CHANNEL | SOURCE_LUMA.
// REQUIRES: compaction_common.glsl included before.

layout(local_size_x = 64) in;
layout(binding = 0, rgba32ui) readonly uniform uimage2D u_packed;

#define PIXEL_BYTES (CHANNELS * SAMPLE_BITS / 8)
#define PPW (4 / PIXEL_BYTES)             // pixels per 32-bit word
#define SEG 32                            // pixels per segment: one bit each in a uint
#define SEG_TEXELS (SEG / (4 * PPW))      // texels per segment
#define GROUP_PIXELS (4 * SEG)

uniform uint u_items;   // invocations that have work
uniform int u_groups;   // groups per row: ceil(width / GROUP_PIXELS)

uint flat_invocation() {
  return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x +
         gl_LocalInvocationIndex;
}

bool word_pixel_passes(uint word, int j) {
#if defined(SOURCE_LUMA)
  // 4-channel uint8 only: one pixel per word.
  uint key = luma_u(uvec3(word & 0xFFu, (word >> 8) & 0xFFu, (word >> 16) & 0xFFu));
#else
  int shift = j * PIXEL_BYTES * 8 + u_channel * SAMPLE_BITS;
#if SAMPLE_BITS == 32
  uint bits = word;
#else
  uint bits = (word >> uint(shift)) & ((1u << uint(SAMPLE_BITS)) - 1u);
#endif
#if defined(FMT_FLOAT)
  float v = uintBitsToFloat(bits);
  if (isnan(v)) return false;
  uint key = ordered_key(v);
#else
  uint key = bits;
#endif
#endif
  bool in_range = key >= u_keys.x && key <= u_keys.y;
  return in_range == u_inside;
}

#if defined(SOURCE_CHANNEL) && defined(FMT_UINT) && SAMPLE_BITS == 8
// One channel of 8-bit pixels: the bounds are tested a word at a time. Bytes 0, 2 and 1, 3 of a
// word go into two words of 16-bit fields; adding 256 - lo to a field carries into its bit 8
// exactly when the byte is >= lo, adding 255 - hi exactly when it is > hi, and no carry leaves a
// field. swar_inside(w, k) has bit 0 of each field set for the bytes inside the range: bytes 0
// and 2 in .x (bits 0 and 16), 1 and 3 in .y; k = swar_keys(), computed once per loop.
#define SWAR_BYTES 1
uvec2 swar_keys() {
  return uvec2(256u - min(u_keys.x, 256u), 255u - min(u_keys.y, 255u)) * 0x00010001u;
}
uvec2 swar_inside(uint w, uvec2 k) {
  uint e = w & 0x00FF00FFu, o = (w >> 8u) & 0x00FF00FFu;
  return uvec2(((e + k.x) >> 8u) & ~((e + k.y) >> 8u), ((o + k.x) >> 8u) & ~((o + k.y) >> 8u)) &
         0x00010001u;
}
#endif

// Pass bits of the segment of row y (image row) starting at pixel x0 (a multiple of SEG): bit k
// for pixel x0 + k; pixels at or past the width never pass.
uint segment_bits(int y, int x0) {
  uint bits = 0u;
  int tx0 = x0 / (4 * PPW);
#if defined(SWAR_BYTES) && CHANNELS == 1
  const uvec2 keys = swar_keys();
#endif
  for (int t = 0; t < SEG_TEXELS; ++t) {
    uvec4 v = imageLoad(u_packed, ivec2(tx0 + t, y));
    for (int q = 0; q < 4; ++q) {
#if defined(SWAR_BYTES) && CHANNELS == 1
      // Four pixels per word: the bytes' bits in order, flipped for the outside sense.
      uvec2 f = swar_inside(v[q], keys);
      uint nib = (f.x | (f.y << 1u) | (f.x >> 14u) | (f.y >> 13u)) & 0xFu;
      if (!u_inside) nib ^= 0xFu;
      bits |= nib << uint((t * 4 + q) * 4);
#else
      for (int j = 0; j < PPW; ++j) {
        if (word_pixel_passes(v[q], j)) bits |= 1u << uint((t * 4 + q) * PPW + j);
      }
#endif
    }
  }
  int n = u_size.x - x0;
  if (n < SEG) bits &= n > 0 ? (1u << uint(n)) - 1u : 0u;
  return bits;
}

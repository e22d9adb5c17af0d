// Shared by the strip-scan compaction shaders (CPU renderers): the image is read from its packed
// form (16 bytes of a row per image load) and cut into segments of 32 pixels of one row, each
// invocation taking 4 segments (a group). Layouts of 1, 2 or 4 bytes per pixel, where every 32-bit
// word holds whole pixels (PPW of them) and the selected sample of pixel j of a word sits at a
// shift that is a constant plus the uniform channel's offset; and 3 bytes (8-bit RGB), where every
// 3 words hold 4 whole pixels (a quad), so a segment is 6 texels and every sample's word and shift
// within its quad are constants (plus the channel's offset).
// Defines: the image's (FMT_*, CHANNELS, SAMPLE_BITS), SOURCE_CHANNEL | SOURCE_LUMA; for
// SOURCE_CHANNEL on 3-byte pixels STRIP_CHANNEL, the channel (u_channel elsewhere).
// REQUIRES: compaction_common.glsl included before.

layout(local_size_x = 64) in;
layout(binding = 0, rgba32ui) readonly uniform uimage2D u_packed;

#define PIXEL_BYTES (CHANNELS * SAMPLE_BITS / 8)
#define SEG 32                            // pixels per segment: one bit each in a uint
#if PIXEL_BYTES == 3
#define SEG_TEXELS 6                      // 96 bytes: two runs of 3 texels, 4 quads each
#else
#define PPW (4 / PIXEL_BYTES)             // pixels per 32-bit word
#define SEG_TEXELS (SEG / (4 * PPW))      // texels per segment
#endif
#define GROUP_PIXELS (4 * SEG)

uniform uint u_items;   // invocations that have work
uniform int u_groups;   // groups per row: ceil(width / GROUP_PIXELS)

uint flat_invocation() {
  return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x +
         gl_LocalInvocationIndex;
}

#if PIXEL_BYTES != 3
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
#endif

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

#if PIXEL_BYTES == 3
// The quad of pixels in words a, b, c (pixel j's sample c at byte 3 j + c of the 12): bit j set
// for each pixel whose key is inside the range (the caller turns that around for u_inside ==
// false). SOURCE_CHANNEL: k = swar_keys(), computed once per call of segment_bits.
#if defined(SOURCE_CHANNEL)
#define QUAD_PARAMS , uvec2 k
#define QUAD_ARGS , k
// swar_inside of the word of the quad's 4 selected samples: pixels 0 and 2 in .x, 1 and 3 in .y.
uvec2 quad_fields(uint a, uint b, uint c, uvec2 k) {
  // The 12 bytes shifted down by the channel's offset (a funnel shift: (y << 1) << (31 - sh) is
  // y << (32 - sh), 0 for sh = 0), so that pixel j's sample is byte 3 j of s0 s1 s2; those four
  // bytes into one word, tested a byte at a time as for 1-channel images. With the channel a
  // define every shift is a constant: 95.8 M instructions where a uniform channel took 99.7 M
  // (bench/instructions.sh, 1920x1080, 10%, a list and a count call and the CPU reference).
  const uint sh = uint(STRIP_CHANNEL) * 8u;
  uint s0 = (a >> sh) | ((b << 1u) << (31u - sh));
  uint s1 = (b >> sh) | ((c << 1u) << (31u - sh));
  uint s2 = c >> sh;
  uint w = (s0 & 0xFFu) | ((s0 >> 16u) & 0xFF00u) | (s1 & 0xFF0000u) | ((s2 << 16u) & 0xFF000000u);
  return swar_inside(w, k);
}
uint quad_inside(uint a, uint b, uint c QUAD_PARAMS) {
  uvec2 f = quad_fields(a, b, c, k);
  return (f.x | (f.y << 1u) | (f.x >> 14u) | (f.y >> 13u)) & 0xFu;
}
#else
#define QUAD_PARAMS
#define QUAD_ARGS
uint quad_inside(uint a, uint b, uint c) {
  uvec4 r = uvec4(a, a >> 24u, b >> 16u, c >> 8u) & 0xFFu;
  uvec4 g = uvec4(a >> 8u, b, b >> 24u, c >> 16u) & 0xFFu;
  uvec4 bl = uvec4(a >> 16u, b >> 8u, c, c >> 24u) & 0xFFu;
  // luma_u (prelude.glsl) of the four pixels at once.
  uvec4 key = (9798u * r + 19235u * g + 3735u * bl + 16384u) >> 15u;
  uvec4 inside = uvec4(greaterThanEqual(key, uvec4(u_keys.x))) &
                 uvec4(lessThanEqual(key, uvec4(u_keys.y)));
  return inside.x | (inside.y << 1u) | (inside.z << 2u) | (inside.w << 3u);
}
#endif

// Inside bits of the 16 pixels in texels tx, tx + 1 and tx + 2 of row y: bit k for pixel k.
uint run_inside(int y, int tx QUAD_PARAMS) {
  uvec4 t0 = imageLoad(u_packed, ivec2(tx, y));
  uvec4 t1 = imageLoad(u_packed, ivec2(tx + 1, y));
  uvec4 t2 = imageLoad(u_packed, ivec2(tx + 2, y));
  return quad_inside(t0.x, t0.y, t0.z QUAD_ARGS) | (quad_inside(t0.w, t1.x, t1.y QUAD_ARGS) << 4u) |
         (quad_inside(t1.z, t1.w, t2.x QUAD_ARGS) << 8u) |
         (quad_inside(t2.y, t2.z, t2.w QUAD_ARGS) << 12u);
}
#endif

// Pass bits of the segment of row y (image row) starting at pixel x0 (a multiple of SEG): bit k
// for pixel x0 + k; pixels at or past the width never pass.
#if PIXEL_BYTES == 3
uint segment_bits(int y, int x0) {
  int tx0 = x0 / SEG * SEG_TEXELS;
#if defined(SOURCE_CHANNEL)
  const uvec2 k = swar_keys();
#endif
  uint bits = run_inside(y, tx0 QUAD_ARGS) | (run_inside(y, tx0 + 3 QUAD_ARGS) << 16u);
  if (!u_inside) bits = ~bits;
  int n = u_size.x - x0;
  if (n < SEG) bits &= n > 0 ? (1u << uint(n)) - 1u : 0u;
  return bits;
}
#else
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
#endif

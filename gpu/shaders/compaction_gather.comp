// The output for a chunk of the ordered list of pixel keys ((y << 16) | x): the (x, y) of every
// entry and the packed values (all channels of each pixel, the image's sample type,
// little-endian: 4 uint8, 2 uint16 or 1 float32 sample per word). Defines: FMT_UINT | FMT_FLOAT,
// SAMPLE_BITS, CHANNELS, and PACKED_IMAGE to read the image's packed form (prelude.glsl).
#include "compaction_block_scan.glsl"

// The bits of pixel q's samples, from the texture or (PACKED_IMAGE, prelude.glsl) the packed form.
uvec4 pixel_bits(ivec2 q) {
#if defined(PACKED_IMAGE)
  return packed_bits(q);
#elif defined(FMT_UINT)
  return load_texel(q);
#else
  return floatBitsToUint(load_texel(q));
#endif
}

layout(std430, binding = 1) readonly buffer Indices { uint indices[]; };  // bound at the chunk
layout(std430, binding = 6) writeonly buffer Values { uint values[]; };
uniform uint u_count;  // entries in the chunk
uniform uint u_words;  // words of values

ivec2 position(uint key) { return ivec2(key & 0xFFFFu, key >> 16); }

#define PIXEL_BITS (CHANNELS * SAMPLE_BITS)
#if PIXEL_BITS == 8 || PIXEL_BITS == 16 || PIXEL_BITS == 32
// A pixel's samples fit a word a whole number of times: invocation i writes word i of the values,
// the PER_WORD entries it packs, and their (x, y), each key read once and the (x, y) stored as
// vectors (on llvmpipe every storage access is a loop over the SIMD lanes: 8 accesses for four
// 1-byte pixels instead of 21). Past the chunk's last entry the word and the xy buffer (which
// holds whole words' entries) repeat it; the caller reads only the chunk's entries.
#define PER_WORD (32 / PIXEL_BITS)
#if defined(HAVE_INT64)
// Each (x, y) as one 64-bit component (as_u64_pair, prelude.glsl).
#if PER_WORD == 1
layout(std430, binding = 5) writeonly buffer Xy { uint64_t xy[]; };
#define XY_ONE(a) packUint2x32(a)
#else
layout(std430, binding = 5) writeonly buffer Xy { u64vec2 xy[]; };
#define XY_PAIR(a, b) as_u64_pair(uvec4(a, b))
#endif
#elif PER_WORD == 1
layout(std430, binding = 5) writeonly buffer Xy { uvec2 xy[]; };
#define XY_ONE(a) (a)
#else
layout(std430, binding = 5) writeonly buffer Xy { uvec4 xy[]; };
#define XY_PAIR(a, b) uvec4(a, b)
#endif

void main() {
  uint i = flat_group_index() * kThreads + gl_LocalInvocationIndex;
  if (i >= u_words) return;
  uint last = u_count - 1u;
  uvec2 p[PER_WORD];
  uint word = 0u;
  for (int k = 0; k < PER_WORD; ++k) {
    uint entry = i * uint(PER_WORD) + uint(k);
    ivec2 q = position(indices[min(entry, last)]);
    p[k] = uvec2(q);
    uvec4 t = pixel_bits(q);
    uint bits = 0u;
    for (int c = 0; c < CHANNELS; ++c) {
#if SAMPLE_BITS < 32
      bits |= (t[c] & ((1u << uint(SAMPLE_BITS)) - 1u)) << uint(c * SAMPLE_BITS);
#else
      bits = t[c];
#endif
    }
    word |= bits << uint(k * PIXEL_BITS);
  }
  values[i] = word;
#if PER_WORD == 4
  xy[2u * i] = XY_PAIR(p[0], p[1]);
  xy[2u * i + 1u] = XY_PAIR(p[2], p[3]);
#elif PER_WORD == 2
  xy[i] = XY_PAIR(p[0], p[1]);
#else
  xy[i] = XY_ONE(p[0]);
#endif
}

#elif PIXEL_BITS == 24
// 8-bit RGB: invocation i writes the 4 entries 4 i to 4 i + 3, their (x, y) as in the path above
// and their 12 bytes, words 3 i to 3 i + 2 of the values (past the chunk's last entry the quad
// repeats it, as above; the caller sizes the values for whole quads).
#if defined(HAVE_INT64)
layout(std430, binding = 5) writeonly buffer Xy { u64vec2 xy[]; };
#define XY_PAIR(a, b) as_u64_pair(uvec4(a, b))
#else
layout(std430, binding = 5) writeonly buffer Xy { uvec4 xy[]; };
#define XY_PAIR(a, b) uvec4(a, b)
#endif

// The 3 bytes of pixel q in the low 24 bits.
uint pixel24(ivec2 q) {
#if defined(PACKED_IMAGE)
  // Bytes 3 x to 3 x + 2 of row y: from the word holding the first and the next one (in the next
  // texel for the texel's last word), a funnel shift ((n << 1) << (31 - sh) is n << (32 - sh),
  // 0 for sh = 0). Two image loads, not the three of packed_bits.
  uint byte = uint(q.x) * 3u;
  int tx = int(byte >> 4u);
  uvec4 t = imageLoad(u_packed, ivec2(tx, q.y));
  uint w = (byte >> 2u) & 3u, sh = (byte & 3u) * 8u;
  uint next = w == 3u ? imageLoad(u_packed, ivec2(tx + 1, q.y)).x : t[min(w + 1u, 3u)];
  return ((t[w] >> sh) | ((next << 1u) << (31u - sh))) & 0xFFFFFFu;
#else
  uvec4 t = pixel_bits(q) & 0xFFu;
  return t.r | (t.g << 8u) | (t.b << 16u);
#endif
}

void main() {
  uint i = flat_group_index() * kThreads + gl_LocalInvocationIndex;
  if (i >= (u_count + 3u) / 4u) return;
  uint last = u_count - 1u;
  uvec2 p[4];
  uint v[4];
  for (int k = 0; k < 4; ++k) {
    ivec2 q = position(indices[min(i * 4u + uint(k), last)]);
    p[k] = uvec2(q);
    v[k] = pixel24(q);
  }
  values[3u * i] = v[0] | (v[1] << 24u);
  values[3u * i + 1u] = (v[1] >> 8u) | (v[2] << 16u);
  values[3u * i + 2u] = (v[2] >> 16u) | (v[3] << 8u);
  xy[2u * i] = XY_PAIR(p[0], p[1]);
  xy[2u * i + 1u] = XY_PAIR(p[2], p[3]);
}

#else
// Pixels of 6, 8, 12 or 16 bytes: invocation i writes the (x, y) of entry i and word i of the
// values.
layout(std430, binding = 5) writeonly buffer Xy { uint xy[]; };

void main() {
  uint i = flat_group_index() * kThreads + gl_LocalInvocationIndex;
  if (i < u_count) {
    ivec2 p = position(indices[i]);
    xy[2u * i] = uint(p.x);
    xy[2u * i + 1u] = uint(p.y);
  }
  if (i >= u_words) return;
  const uint kPerWord = 32u / uint(SAMPLE_BITS);
  const uint kChannels = uint(CHANNELS);
  uint samples = u_count * kChannels;
  uint word = 0u;
  uint loaded = 0xFFFFFFFFu;
  uvec4 t;
  for (uint k = 0u; k < kPerWord; ++k) {
    uint s = i * kPerWord + k;
    if (s >= samples) break;
    uint entry = s / kChannels;
    if (entry != loaded) {
      t = pixel_bits(position(indices[entry]));
      loaded = entry;
    }
    uint c = s % kChannels;
    uint bits = t[c];
#if SAMPLE_BITS < 32
    bits &= (1u << uint(SAMPLE_BITS)) - 1u;
#endif
    word |= bits << (k * uint(SAMPLE_BITS));
  }
  values[i] = word;
}
#endif

// The output for a chunk of the ordered list of pixel keys ((y << 16) | x): invocation i writes
// the (x, y) of entry i and word i of the packed values (all channels of each pixel, the image's
// sample type, little-endian: 4 uint8, 2 uint16 or 1 float32 sample per word). Defines: FMT_UINT
// | FMT_FLOAT, SAMPLE_BITS, CHANNELS.
#include "compaction_block_scan.glsl"

layout(std430, binding = 1) readonly buffer Indices { uint indices[]; };  // bound at the chunk
layout(std430, binding = 5) writeonly buffer Xy { uint xy[]; };
layout(std430, binding = 6) writeonly buffer Values { uint values[]; };
uniform uint u_count;  // entries in the chunk
uniform uint u_words;  // words of values

ivec2 position(uint key) { return ivec2(key & 0xFFFFu, key >> 16); }

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
#if defined(FMT_UINT)
  uvec4 t;
#else
  vec4 t;
#endif
  for (uint k = 0u; k < kPerWord; ++k) {
    uint s = i * kPerWord + k;
    if (s >= samples) break;
    uint entry = s / kChannels;
    if (entry != loaded) {
      t = load_texel(position(indices[entry]));
      loaded = entry;
    }
    uint c = s % kChannels;
#if defined(FMT_UINT)
    uint bits = t[c];
#else
    uint bits = floatBitsToUint(t[c]);
#endif
#if SAMPLE_BITS < 32
    bits &= (1u << uint(SAMPLE_BITS)) - 1u;
#endif
    word |= bits << (k * uint(SAMPLE_BITS));
  }
  values[i] = word;
}

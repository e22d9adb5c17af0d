// A private counter array per invocation, for CPU renderers. Each invocation walks whole rows of
// the image's packed form (16 bytes per image load) and increments its own counters with plain
// adds. llvmpipe keeps such an array per SIMD lane on its stack and indexes it lane by lane with
// plain loads and stores, where shared-memory and storage accesses become a loop over the lanes
// with a bounds check each, and atomics besides. Invocation i takes rows i, i + N, i + 2N, ...
// and writes its counters to partials[i]; the host adds up each image's partials.
//
// The packed texture may be an atlas of several images of the same format, their rows stacked (a
// single image is an atlas of one). Each image has its own N invocations, a whole number of
// workgroups: segments[] tells each workgroup its image's rows, and ranges[] each image's
// invocations, so one dispatch counts every image as it would be counted alone.
//
// Compile-time: the image format (FMT_*, CHANNELS, SAMPLE_BITS), SOURCE (0 one channel, 1 every
// channel, 2 luma, 3 R+G+B), HIST_WORDS and the key binning (KEY_TABLE, KEY_SHIFT, or neither),
// so the per-texel work unrolls to straight-line code.
#include "histogram_common.glsl"

layout(local_size_x = 8) in;
layout(binding = 0, rgba32ui) readonly uniform uimage2D u_packed;
layout(std430, binding = 2) writeonly buffer Partials { uint partials[]; };  // [invocation][u_words]
// Per workgroup: its image's first atlas row, height, samples per row (width * CHANNELS), index.
layout(std430, binding = 3) readonly buffer Segments { ivec4 segments[]; };
// Per image: its invocations [first, end); rows are dealt out round-robin among them.
layout(std430, binding = 4) readonly buffer Ranges { ivec2 ranges[]; };

uniform int u_words;  // u_hists * u_bins
// Integer keys: bin = ((key - u_key_base) * u_key_mul) >> u_key_shift for key - u_key_base below
// u_key_range (checked on the CPU to equal the bin table for every key); with KEY_SHIFT, where
// every key is counted, u_key_base is 0 and u_key_mul 1, just key >> u_key_shift; with
// KEY_TABLE, the table itself.
uniform uint u_key_base;
uniform uint u_key_range;
uniform uint u_key_mul;
uniform uint u_key_shift;

const int kSamplesPerTexel = 128 / SAMPLE_BITS;

// One array of HIST_WORDS counters per histogram (LLVM compiles several small arrays much faster
// than one large one), plus a spare counter each for keys outside the range: an unconditional
// increment is cheaper than a masked one. A single histogram gets two copies, even and odd
// pixels, so that neighbouring pixels in the same bin do not wait on each other's increment.
#if SOURCE == 1 && CHANNELS > 1
#define NUM_ARRAYS CHANNELS
#define COPIES 1
#else
#define NUM_ARRAYS 2
#define COPIES 2
#endif
uint h0[HIST_WORDS + 1];
uint h1[HIST_WORDS + 1];
#if NUM_ARRAYS > 2
uint h2[HIST_WORDS + 1];
#endif
#if NUM_ARRAYS > 3
uint h3[HIST_WORDS + 1];
#endif

void bump(int array, uint i) {
  if (array == 1) { h1[i] += 1u; return; }
#if NUM_ARRAYS > 2
  if (array == 2) { h2[i] += 1u; return; }
#endif
#if NUM_ARRAYS > 3
  if (array == 3) { h3[i] += 1u; return; }
#endif
  h0[i] += 1u;
}

#if defined(FMT_UINT)
#define SAMPLE uint
void count(int array, uint key) {
#if defined(KEY_TABLE)
  int b = bin_table[key];
  if (b >= 0) bump(array, uint(b));
#elif defined(KEY_SHIFT)
  bump(array, key >> u_key_shift);  // every key counted, from 0 (the C++ side checked)
#else
  uint d = key - u_key_base;
  bump(array, d < u_key_range ? (d * u_key_mul) >> u_key_shift : uint(HIST_WORDS));
#endif
}
SAMPLE sample_of(uvec4 t, int j) {
#if SAMPLE_BITS == 8
  return (t[j >> 2] >> (8 * (j & 3))) & 0xffu;
#else
  return (t[j >> 1] >> (16 * (j & 1))) & 0xffffu;
#endif
}
#else
#define SAMPLE float
void count(int array, float v) {
  int b = bin_of_value(v);
  if (b >= 0) bump(array, uint(b));
}
SAMPLE sample_of(uvec4 t, int j) { return uintBitsToFloat(t[j]); }
#endif

// Red and green of the pixel being read, kept across texels (a 3-channel pixel may straddle two).
SAMPLE g_r, g_g;

// Sample value v of channel c; copy: the pixel's counter copy (0 or 1: even or odd pixels).
void count_sample(SAMPLE v, int c, int copy) {
  if (COPIES != 2) copy = 0;
#if SOURCE == 0
  if (c == u_channel) count(copy, v);
#elif SOURCE == 1
  count(COPIES == 2 ? copy : c, v);
#else
  if (c == 0) {
    g_r = v;
  } else if (c == 1) {
    g_g = v;
  } else if (c == 2) {
#if defined(FMT_UINT) && SOURCE == 2
    count(copy, luma_u(uvec3(g_r, g_g, v)));
#elif defined(FMT_UINT)
    count(copy, g_r + g_g + v);
#elif SOURCE == 2
    count(copy, luma_f(vec3(g_r, g_g, v)));
#else
    count(copy, mean_f(vec3(g_r, g_g, v)));
#endif
  }
#endif
}

void main() {
  const int me = int(gl_GlobalInvocationID.x);
  const ivec4 segment = segments[gl_WorkGroupID.x];
  const int y0 = segment.x, height = segment.y, row_samples = segment.z;
  const ivec2 range = ranges[segment.w];
  const int invocations = range.y - range.x;
  for (int k = 0; k < u_bins; ++k) {
    h0[k] = 0u;
    h1[k] = 0u;
#if NUM_ARRAYS > 2
    h2[k] = 0u;
#endif
#if NUM_ARRAYS > 3
    h3[k] = 0u;
#endif
  }
  const int full = row_samples / kSamplesPerTexel;
  const int rest = row_samples % kSamplesPerTexel;
  for (int y = y0 + me - range.x; y < y0 + height; y += invocations) {
    int tx = 0;
#if CHANNELS == 3
    // Three texels hold a whole number of 3-channel pixels (16, 8 or 4): read them together, so
    // that every sample's channel and pixel are known when the shader is compiled, as they are
    // for 1, 2 and 4 channels, instead of a running (c0 + j) % 3 that keeps the loop generic.
    for (; tx + 3 <= full; tx += 3) {
      uvec4 t0 = imageLoad(u_packed, ivec2(tx, y));
      uvec4 t1 = imageLoad(u_packed, ivec2(tx + 1, y));
      uvec4 t2 = imageLoad(u_packed, ivec2(tx + 2, y));
      for (int j = 0; j < kSamplesPerTexel; ++j) count_sample(sample_of(t0, j), j % 3, (j / 3) & 1);
      for (int j = 0; j < kSamplesPerTexel; ++j) {
        int s = kSamplesPerTexel + j;
        count_sample(sample_of(t1, j), s % 3, (s / 3) & 1);
      }
      for (int j = 0; j < kSamplesPerTexel; ++j) {
        int s = 2 * kSamplesPerTexel + j;
        count_sample(sample_of(t2, j), s % 3, (s / 3) & 1);
      }
    }
#endif
    // c0: the channel of the texel's first sample (always 0 unless CHANNELS == 3).
    int c0 = 0;
    for (; tx < full; ++tx) {
      uvec4 t = imageLoad(u_packed, ivec2(tx, y));
      for (int j = 0; j < kSamplesPerTexel; ++j) {
        count_sample(sample_of(t, j), CHANNELS == 3 ? (c0 + j) % 3 : j % CHANNELS,
                     CHANNELS == 3 ? 0 : (j / CHANNELS) & 1);
      }
      if (CHANNELS == 3) c0 = (c0 + kSamplesPerTexel) % 3;
    }
    if (rest > 0) {  // the row's last texel is part padding
      uvec4 t = imageLoad(u_packed, ivec2(full, y));
      for (int j = 0; j < rest; ++j) {
        count_sample(sample_of(t, j), (c0 + j) % CHANNELS, CHANNELS == 3 ? 0 : (j / CHANNELS) & 1);
      }
    }
  }
  for (int k = 0; k < u_bins; ++k) {
    int base = me * u_words + k;
#if COPIES == 2
    partials[base] = h0[k] + h1[k];
#else
    partials[base] = h0[k];
    partials[base + u_bins] = h1[k];
#endif
#if NUM_ARRAYS > 2
    partials[base + 2 * u_bins] = h2[k];
#endif
#if NUM_ARRAYS > 3
    partials[base + 3 * u_bins] = h3[k];
#endif
  }
}

// Shared by the histogram variants. Defines from the C++ side:
//   SOURCE_CHANNEL | SOURCE_ALL | SOURCE_LUMA | SOURCE_MEAN, NUM_HISTS (histograms per pixel).
// Integer images map a key (sample, luma or R+G+B) through a bin table built on the CPU, so the
// binning is exact; float images bin in double: floor((v - lo) * scale), lo <= v < hi.

layout(std430, binding = 0) buffer Counts { uint counts[]; };  // [NUM_HISTS][u_bins]
#if defined(FMT_UINT)
layout(std430, binding = 1) readonly buffer BinTable { int bin_table[]; };
#endif

uniform ivec2 u_size;
uniform int u_bins;
uniform int u_channel;
uniform double u_lo;
uniform double u_hi;
uniform double u_scale;  // bins / (hi - lo)

#if defined(FMT_UINT)
int bin_of_key(uint key) { return bin_table[key]; }
#else
int bin_of_value(precise float v) {
  double d = double(v);
  if (!(d >= u_lo && d < u_hi)) return -1;  // also drops NaN
  precise double t = (d - u_lo) * u_scale;
  return min(int(floor(t)), u_bins - 1);
}
#endif

#if defined(FMT_UINT)
#define TEXEL uvec4
#else
#define TEXEL vec4
#endif

// The bin of histogram h for texel t, or -1 when it is not counted.
int bin_of_texel(TEXEL t, int h) {
  #if defined(FMT_UINT)
    #if defined(SOURCE_CHANNEL)
  return bin_of_key(t[u_channel]);
    #elif defined(SOURCE_ALL)
  return bin_of_key(t[h]);
    #elif defined(SOURCE_LUMA)
  return bin_of_key(luma_u(t.rgb));
    #else
  return bin_of_key(t.r + t.g + t.b);
    #endif
  #else
    #if defined(SOURCE_CHANNEL)
  return bin_of_value(t[u_channel]);
    #elif defined(SOURCE_ALL)
  return bin_of_value(t[h]);
    #elif defined(SOURCE_LUMA)
  precise float y = 0.299 * t.r + 0.587 * t.g + 0.114 * t.b;
  return bin_of_value(y);
    #else
  precise float m = (t.r + t.g + t.b) * (1.0 / 3.0);
  return bin_of_value(m);
    #endif
  #endif
}

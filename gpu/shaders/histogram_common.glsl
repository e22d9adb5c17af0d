// Shared by the histogram variants. Uniforms select the source (one program serves every channel
// count and source, which keeps the number of compiled programs small): u_source 0 = one
// channel, 1 = every channel, 2 = luma, 3 = (R+G+B)/3; u_hists histograms per pixel (1 to 4).
// Integer images map a key (sample, luma or R+G+B) through a bin table built on the CPU, so the
// binning is exact; float images bin in double: floor((v - lo) * scale), lo <= v < hi.

layout(std430, binding = 0) buffer Counts { uint counts[]; };  // [u_hists][u_bins]
#if defined(FMT_UINT)
layout(std430, binding = 1) readonly buffer BinTable { int bin_table[]; };
#endif

uniform ivec2 u_size;
uniform int u_bins;
uniform int u_channel;
uniform int u_source;
uniform int u_hists;
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
  if (u_source == 0) return bin_of_key(t[u_channel]);
  if (u_source == 1) return bin_of_key(t[h]);
  if (u_source == 2) return bin_of_key(luma_u(t.rgb));
  return bin_of_key(t.r + t.g + t.b);
#else
  if (u_source == 0) return bin_of_value(t[u_channel]);
  if (u_source == 1) return bin_of_value(t[h]);
  if (u_source == 2) return bin_of_value(luma_f(t.rgb));
  return bin_of_value(mean_f(t.rgb));
#endif
}

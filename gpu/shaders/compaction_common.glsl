// Shared by the compaction shaders: the predicate and the band of rows a dispatch covers.
// Defines from the C++ side: FMT_UINT | FMT_FLOAT, SOURCE_CHANNEL | SOURCE_LUMA.
// The predicate is evaluated on a 32-bit key whose unsigned order is the value order:
//   integer data: the sample (or luma_u) itself, the bounds rounded inward on the CPU;
//   float data: the IEEE bits mapped to an order-preserving unsigned key (-0 folded onto +0),
//   the bounds rounded inward to floats on the CPU. NaN samples pass neither way. Comparing keys
//   moves no float through arithmetic, so devices that flush denormals still compare exactly.

uniform ivec2 u_size;     // image width, height
uniform int u_row0;       // first row of the band
uniform int u_rows;       // rows in the band
uniform int u_channel;    // SOURCE_CHANNEL
uniform uvec2 u_keys;     // inclusive key range [x, y]; x > y: empty
uniform bool u_inside;    // pass when the key is inside the range (else outside)

#if defined(FMT_FLOAT)
uint ordered_key(float v) {
  uint b = floatBitsToUint(v);
  if (b == 0x80000000u) b = 0u;
  return (b & 0x80000000u) != 0u ? ~b : (b | 0x80000000u);
}
#endif

bool passes_texel(
#if defined(FMT_UINT)
    uvec4 t
#else
    vec4 t
#endif
) {
#if defined(FMT_UINT)
  #if defined(SOURCE_LUMA)
  uint key = luma_u(t.rgb);
  #else
  uint key = t[u_channel];
  #endif
#else
  #if defined(SOURCE_LUMA)
  float v = luma_f(t.rgb);
  #else
  float v = t[u_channel];
  #endif
  if (isnan(v)) return false;
  uint key = ordered_key(v);
#endif
  bool in_range = key >= u_keys.x && key <= u_keys.y;
  return in_range == u_inside;
}

bool passes(ivec2 p) { return passes_texel(load_texel(p)); }

// Shared histogram with several pixels per invocation: a 64x64 tile per workgroup, 4x4 pixels per invocation read at a
// stride of 16 (neighbouring invocations read neighbouring pixels). Each invocation merges runs
// of equal bins in registers before touching the shared histogram, so smooth regions cost one
// shared atomic per run instead of one per pixel.
// Several images may share the texture (histogram_bands.glsl): each workgroup's tile lies in one
// of them, bounds-checked against that image and counted into its histograms.
#include "histogram_common.glsl"
#include "histogram_bands.glsl"

layout(local_size_x = 16, local_size_y = 16) in;
const uint kInvocations = 256u;

uniform int u_bin_base;
uniform int u_slice;  // bins held in shared memory per dispatch
shared uint s_hist[SHARED_WORDS];

void main() {
  const ivec4 band = bands[gl_WorkGroupID.y];
  const ivec2 size = band_size(band);
  // Tiles right of a narrower image in a wide atlas count nothing (the whole workgroup returns,
  // so the barriers below stay in uniform control flow).
  if (int(gl_WorkGroupID.x) * 64 >= size.x) return;
  for (uint i = gl_LocalInvocationIndex; i < uint(u_hists * u_slice); i += kInvocations) s_hist[i] = 0u;
  barrier();

  ivec2 base = ivec2(gl_WorkGroupID.xy) * 64 + ivec2(gl_LocalInvocationID.xy);
  int run_bin[4];
  uint run_len[4];
  for (int h = 0; h < u_hists; ++h) {
    run_bin[h] = -1;
    run_len[h] = 0u;
  }
  for (int i = 0; i < 16; ++i) {
    ivec2 p = base + ivec2(i % 4, i / 4) * 16;
    if (any(greaterThanEqual(p - ivec2(0, band_y0(band)), size))) continue;
    TEXEL t = load_texel(p);
    for (int h = 0; h < u_hists; ++h) {
      int b = bin_of_texel(t, h) - u_bin_base;
      if (b < 0 || b >= u_slice) continue;
      if (b == run_bin[h]) {
        ++run_len[h];
      } else {
        if (run_len[h] != 0u) atomicAdd(s_hist[h * u_slice + run_bin[h]], run_len[h]);
        run_bin[h] = b;
        run_len[h] = 1u;
      }
    }
  }
  for (int h = 0; h < u_hists; ++h) {
    if (run_len[h] != 0u) atomicAdd(s_hist[h * u_slice + run_bin[h]], run_len[h]);
  }
  barrier();

  const int counts_base = band_counts_base(band);
  for (uint i = gl_LocalInvocationIndex; i < uint(u_hists * u_slice); i += kInvocations) {
    uint n = s_hist[i];
    int h = int(i) / u_slice, b = u_bin_base + int(i) % u_slice;
    if (n != 0u && b < u_bins) atomicAdd(counts[counts_base + h * u_bins + b], n);
  }
}

// One invocation per pixel, one atomicAdd on the global histogram per counted value: the textbook
// first version, limited by contention on the global counters.
#include "histogram_common.glsl"

// Several images may share the texture (histogram_bands.glsl): each counts into its own histograms.
#include "histogram_bands.glsl"

layout(local_size_x = 16, local_size_y = 16) in;

void main() {
  const ivec4 band = bands[gl_WorkGroupID.y / 4u];  // four 16-row workgroups per band
  ivec2 p = ivec2(gl_GlobalInvocationID.xy);
  if (any(greaterThanEqual(p - ivec2(0, band_y0(band)), band_size(band)))) return;
  TEXEL t = load_texel(p);
  const int base = band_counts_base(band);
  for (int h = 0; h < u_hists; ++h) {
    int b = bin_of_texel(t, h);
    if (b >= 0) atomicAdd(counts[base + h * u_bins + b], 1u);
  }
}

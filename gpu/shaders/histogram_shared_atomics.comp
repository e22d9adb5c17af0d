// A histogram per workgroup in shared memory (one pixel per invocation), added to the global one
// once per workgroup. Bins [u_bin_base, u_bin_base + SLICE) per dispatch when they do not all fit.
#include "histogram_common.glsl"

layout(local_size_x = 16, local_size_y = 16) in;
const uint kInvocations = 256u;

uniform int u_bin_base;
shared uint s_hist[NUM_HISTS * SLICE];

void main() {
  for (uint i = gl_LocalInvocationIndex; i < uint(NUM_HISTS * SLICE); i += kInvocations) s_hist[i] = 0u;
  barrier();

  ivec2 p = ivec2(gl_GlobalInvocationID.xy);
  if (all(lessThan(p, u_size))) {
    TEXEL t = load_texel(p);
    for (int h = 0; h < NUM_HISTS; ++h) {
      int b = bin_of_texel(t, h) - u_bin_base;
      if (b >= 0 && b < SLICE) atomicAdd(s_hist[h * SLICE + b], 1u);
    }
  }
  barrier();

  for (uint i = gl_LocalInvocationIndex; i < uint(NUM_HISTS * SLICE); i += kInvocations) {
    uint n = s_hist[i];
    int h = int(i) / SLICE, b = u_bin_base + int(i) % SLICE;
    if (n != 0u && b < u_bins) atomicAdd(counts[h * u_bins + b], n);
  }
}

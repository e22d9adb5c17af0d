// A histogram per workgroup in shared memory (one pixel per invocation), added to the global one
// once per workgroup. Bins [u_bin_base, u_bin_base + u_slice) per dispatch when they do not all fit.
#include "histogram_common.glsl"

layout(local_size_x = 16, local_size_y = 16) in;
const uint kInvocations = 256u;

uniform int u_bin_base;
uniform int u_slice;  // bins held in shared memory per dispatch
shared uint s_hist[SHARED_WORDS];

void main() {
  for (uint i = gl_LocalInvocationIndex; i < uint(u_hists * u_slice); i += kInvocations) s_hist[i] = 0u;
  barrier();

  ivec2 p = ivec2(gl_GlobalInvocationID.xy);
  if (all(lessThan(p, u_size))) {
    TEXEL t = load_texel(p);
    for (int h = 0; h < u_hists; ++h) {
      int b = bin_of_texel(t, h) - u_bin_base;
      if (b >= 0 && b < u_slice) atomicAdd(s_hist[h * u_slice + b], 1u);
    }
  }
  barrier();

  for (uint i = gl_LocalInvocationIndex; i < uint(u_hists * u_slice); i += kInvocations) {
    uint n = s_hist[i];
    int h = int(i) / u_slice, b = u_bin_base + int(i) % u_slice;
    if (n != 0u && b < u_bins) atomicAdd(counts[h * u_bins + b], n);
  }
}

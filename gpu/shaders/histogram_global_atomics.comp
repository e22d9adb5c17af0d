// One invocation per pixel, one atomicAdd on the global histogram per counted value: the textbook
// first version, limited by contention on the global counters.
#include "histogram_common.glsl"

layout(local_size_x = 16, local_size_y = 16) in;

void main() {
  ivec2 p = ivec2(gl_GlobalInvocationID.xy);
  if (any(greaterThanEqual(p, u_size))) return;
  TEXEL t = load_texel(p);
  for (int h = 0; h < u_hists; ++h) {
    int b = bin_of_texel(t, h);
    if (b >= 0) atomicAdd(counts[h * u_bins + b], 1u);
  }
}

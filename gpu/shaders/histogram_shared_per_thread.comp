// The seed's third version: a 64x64 tile per workgroup, 4x4 pixels per invocation read at a
// stride of 16 (neighbouring invocations read neighbouring pixels). Each invocation merges runs
// of equal bins in registers before touching the shared histogram, so smooth regions cost one
// shared atomic per run instead of one per pixel.
#include "histogram_common.glsl"

layout(local_size_x = 16, local_size_y = 16) in;
const uint kInvocations = 256u;

uniform int u_bin_base;
shared uint s_hist[NUM_HISTS * SLICE];

void main() {
  for (uint i = gl_LocalInvocationIndex; i < uint(NUM_HISTS * SLICE); i += kInvocations) s_hist[i] = 0u;
  barrier();

  ivec2 base = ivec2(gl_WorkGroupID.xy) * 64 + ivec2(gl_LocalInvocationID.xy);
  int run_bin[NUM_HISTS];
  uint run_len[NUM_HISTS];
  for (int h = 0; h < NUM_HISTS; ++h) {
    run_bin[h] = -1;
    run_len[h] = 0u;
  }
  for (int i = 0; i < 16; ++i) {
    ivec2 p = base + ivec2(i % 4, i / 4) * 16;
    if (any(greaterThanEqual(p, u_size))) continue;
    TEXEL t = load_texel(p);
    for (int h = 0; h < NUM_HISTS; ++h) {
      int b = bin_of_texel(t, h) - u_bin_base;
      if (b < 0 || b >= SLICE) continue;
      if (b == run_bin[h]) {
        ++run_len[h];
      } else {
        if (run_len[h] != 0u) atomicAdd(s_hist[h * SLICE + run_bin[h]], run_len[h]);
        run_bin[h] = b;
        run_len[h] = 1u;
      }
    }
  }
  for (int h = 0; h < NUM_HISTS; ++h) {
    if (run_len[h] != 0u) atomicAdd(s_hist[h * SLICE + run_bin[h]], run_len[h]);
  }
  barrier();

  for (uint i = gl_LocalInvocationIndex; i < uint(NUM_HISTS * SLICE); i += kInvocations) {
    uint n = s_hist[i];
    int h = int(i) / SLICE, b = u_bin_base + int(i) % SLICE;
    if (n != 0u && b < u_bins) atomicAdd(counts[h * u_bins + b], n);
  }
}

// ROWS invocations per workgroup, each with a private histogram row in shared memory that it
// increments with plain (non-atomic) adds over its share of a 64x64 tile; after a barrier the
// rows are summed and added to the global histogram. No shared atomics at all: fastest where
// they are expensive (CPU renderers such as llvmpipe).
#include "histogram_common.glsl"

layout(local_size_x = ROWS) in;
uniform int u_bin_base;
uniform int u_slice;  // bins held in shared memory per dispatch
shared uint s_rows[SHARED_WORDS];

void main() {
  uint me = gl_LocalInvocationIndex;
  int row_words = u_hists * u_slice;
  for (uint i = me; i < uint(ROWS * row_words); i += uint(ROWS)) s_rows[i] = 0u;
  barrier();

  ivec2 origin = ivec2(gl_WorkGroupID.xy) * 64;
  int row = int(me) * row_words;
  for (int i = int(me); i < 64 * 64; i += ROWS) {
    ivec2 p = origin + ivec2(i % 64, i / 64);
    if (any(greaterThanEqual(p, u_size))) continue;
    TEXEL t = load_texel(p);
    for (int h = 0; h < u_hists; ++h) {
      int b = bin_of_texel(t, h) - u_bin_base;
      if (b >= 0 && b < u_slice) s_rows[row + h * u_slice + b] += 1u;
    }
  }
  barrier();

  for (int i = int(me); i < row_words; i += ROWS) {
    uint n = 0u;
    for (int r = 0; r < ROWS; ++r) n += s_rows[r * row_words + i];
    int h = i / u_slice, b = u_bin_base + i % u_slice;
    if (n != 0u && b < u_bins) atomicAdd(counts[h * u_bins + b], n);
  }
}

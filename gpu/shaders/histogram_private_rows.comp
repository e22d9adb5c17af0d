// ROWS invocations per workgroup, each with a private histogram row in shared memory that it
// increments with plain (non-atomic) adds over its share of a 64x64 tile; after a barrier the
// rows are summed and added to the global histogram. No shared atomics at all: fastest where
// they are expensive (CPU renderers such as llvmpipe).
#include "histogram_common.glsl"

layout(local_size_x = ROWS) in;
const int kRow = NUM_HISTS * SLICE;

uniform int u_bin_base;
shared uint s_rows[ROWS * kRow];

void main() {
  uint me = gl_LocalInvocationIndex;
  for (uint i = me; i < uint(ROWS * kRow); i += uint(ROWS)) s_rows[i] = 0u;
  barrier();

  ivec2 origin = ivec2(gl_WorkGroupID.xy) * 64;
  int row = int(me) * kRow;
  for (int i = int(me); i < 64 * 64; i += ROWS) {
    ivec2 p = origin + ivec2(i % 64, i / 64);
    if (any(greaterThanEqual(p, u_size))) continue;
    TEXEL t = load_texel(p);
    for (int h = 0; h < NUM_HISTS; ++h) {
      int b = bin_of_texel(t, h) - u_bin_base;
      if (b >= 0 && b < SLICE) s_rows[row + h * SLICE + b] += 1u;
    }
  }
  barrier();

  for (int i = int(me); i < kRow; i += ROWS) {
    uint n = 0u;
    for (int r = 0; r < ROWS; ++r) n += s_rows[r * kRow + i];
    int h = i / SLICE, b = u_bin_base + i % SLICE;
    if (n != 0u && b < u_bins) atomicAdd(counts[h * u_bins + b], n);
  }
}

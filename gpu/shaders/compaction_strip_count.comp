// Strip scan, pass 1: each invocation takes one row of the band and counts the passing pixels of
// its segments privately (no atomics, no shared memory). List mode: writes, per group of four
// segments and with one store, each segment's offset within the row (an exclusive scan along the
// row), and the row's total. COUNT_ONLY: adds the row's total to the band's counter (one atomic
// per row).
#include "compaction_common.glsl"
#include "compaction_strip_common.glsl"

layout(std430, binding = 0) buffer Counters { uint counters[]; };  // one per band
#if !defined(COUNT_ONLY)
layout(std430, binding = 2) writeonly buffer SegmentOffsets { uvec4 offsets[]; };  // per group
layout(std430, binding = 4) writeonly buffer RowTotals { uint row_totals[]; };
#endif
uniform int u_band;

#if defined(COUNT_ONLY) && defined(SWAR_BYTES) && PIXEL_BYTES == 3
// Counting one channel of 3-channel 8-bit pixels: the fields of each quad's selected samples
// (quad_fields) summed, no bit per pixel, for the row's whole 16-pixel runs; the bits of the
// last, partial run counted.
#define SWAR_COUNT 1
uint swar_row_inside(int y) {
  const uvec2 k = swar_keys();
  int runs = u_size.x / 16;
  uint acc = 0u;  // two 16-bit fields, at most 8 per run each: rows up to 2^17 pixels
  for (int r = 0; r < runs; ++r) {
    uvec4 t0 = imageLoad(u_packed, ivec2(3 * r, y));
    uvec4 t1 = imageLoad(u_packed, ivec2(3 * r + 1, y));
    uvec4 t2 = imageLoad(u_packed, ivec2(3 * r + 2, y));
    uvec2 f = quad_fields(t0.x, t0.y, t0.z, k) + quad_fields(t0.w, t1.x, t1.y, k) +
              quad_fields(t1.z, t1.w, t2.x, k) + quad_fields(t2.y, t2.z, t2.w, k);
    acc += f.x + f.y;
  }
  uint n = (acc & 0xFFFFu) + (acc >> 16u);
  int rest = u_size.x - 16 * runs;
  if (rest > 0) n += uint(bitCount(run_inside(y, 3 * runs, k) & ((1u << uint(rest)) - 1u)));
  return n;
}
#elif defined(COUNT_ONLY) && defined(SWAR_BYTES)
// Counting one channel of 1, 2 or 4-channel 8-bit pixels: whole words at a time (swar_inside), no
// bit per pixel; the fields of the selected channel's bytes count the passing ones.
#define SWAR_COUNT 1

// Pixels of row y whose sample is inside the key range (the caller turns that around for
// u_inside == false).
uint swar_row_inside(int y) {
  // Bit 0 of the fields of the channel's bytes: 0, 2 (.x) and 1, 3 (.y).
  uvec2 sel = uvec2(0u);
  for (int b = 0; b < 4; ++b) {
    if (b % CHANNELS != u_channel) continue;
    uint bit = (b & 2) != 0 ? 0x10000u : 1u;
    if ((b & 1) == 0) sel.x |= bit; else sel.y |= bit;
  }
  const uvec2 keys = swar_keys();
  int row_bytes = u_size.x * CHANNELS;
  int full = row_bytes / 16;
  uint acc = 0u;  // two 16-bit fields, at most 2 per word each: rows up to 2^17 bytes
  for (int t = 0; t < full; ++t) {
    uvec4 v = imageLoad(u_packed, ivec2(t, y));
    uvec2 f = (swar_inside(v.x, keys) + swar_inside(v.y, keys) + swar_inside(v.z, keys) +
               swar_inside(v.w, keys)) & (sel * 7u);
    acc += f.x + f.y;
  }
  int rest = row_bytes - 16 * full;  // the last texel's bytes inside the row; the rest is padding
  if (rest > 0) {
    uvec4 v = imageLoad(u_packed, ivec2(full, y));
    for (int q = 0; q < 4; ++q) {
      int keep = clamp(rest - 4 * q, 0, 4);  // bytes of word q inside the row
      uvec2 valid = uvec2((keep > 0 ? 1u : 0u) | (keep > 2 ? 0x10000u : 0u),
                          (keep > 1 ? 1u : 0u) | (keep > 3 ? 0x10000u : 0u));
      uvec2 f = swar_inside(v[q], keys) & sel & valid;
      acc += f.x + f.y;
    }
  }
  return (acc & 0xFFFFu) + (acc >> 16u);
}
#endif

void main() {
  uint r = flat_invocation();
  if (r >= u_items) return;
  int y = u_row0 + int(r);
#if defined(SWAR_COUNT)
  uint inside = swar_row_inside(y);
  uint n = u_inside ? inside : uint(u_size.x) - inside;
#else
  uint n = 0u;
  for (int g = 0; g < u_groups; ++g) {
    uvec4 first;
    for (int s = 0; s < 4; ++s) {
      first[s] = n;
      n += uint(bitCount(segment_bits(y, g * GROUP_PIXELS + s * SEG)));
    }
#if !defined(COUNT_ONLY)
    offsets[r * uint(u_groups) + uint(g)] = first;
#endif
  }
#endif
#if defined(COUNT_ONLY)
  if (n != 0u) atomicAdd(counters[u_band], n);
#else
  row_totals[r] = n;
#endif
}

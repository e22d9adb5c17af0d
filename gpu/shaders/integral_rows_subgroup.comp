// Row scan by subgroup ballots, for 8- and 16-bit images: one workgroup scans a block of BLOCK
// pixels of one image row, one pixel per invocation, every channel, and writes the block's total
// to `sums` (block sums and carries as for integral_rows_scan, which this pass stands in for).
//
// Within a subgroup (a warp of 32 on NVIDIA, 8 SIMD lanes on llvmpipe) the exclusive prefix sum
// of the samples is formed one bit at a time: ballotARB(bit b of v) has a bit set for each member
// whose sample has bit b, so bitCount(ballot & gl_SubGroupLtMaskARB) << b, summed over the BITS
// bits, is the sum of the samples of the members below this one, exactly, in registers, with no
// shared memory and no barrier (binary prefix sums by ballot and population count, as in Harris
// and Garland, "Optimizing Parallel Prefix Operations for the Fermi Architecture", GPU Computing
// Gems Jade Edition, 2011, applied to each bit of the sample). Only the subgroups' totals go
// through shared memory, with one barrier.
//
// Which invocations share a subgroup is the driver's: a subgroup claims the next run of the
// block's pixels with one shared atomicAdd (as many as it has members) and its members take them
// in the order of their subgroup invocation ids, so no layout of subgroups in the workgroup is
// assumed. Every invocation reaches every ballot (those past the row's end with 0).
#include "integral_common.glsl"
#if !defined(HAVE_BALLOT) || !defined(FMT_UINT)
#error "integral_rows_subgroup needs GL_ARB_shader_ballot, 64-bit integers and an integer image"
#endif

#if defined(SQUARED)
#define BITS (2 * SAMPLE_BITS)  // bits of a sample as summed
#else
#define BITS SAMPLE_BITS
#endif

layout(local_size_x = BLOCK) in;
layout(std430, binding = 0) writeonly buffer Table { uvec2 table[]; };
layout(std430, binding = 3) writeonly buffer Sums { uvec2 sums[]; };

uniform ivec2 u_origin;  // image coordinates of line 0, pixel 0
uniform int u_line_len;  // pixels per line
uniform int u_nblocks;   // blocks per line

shared uint s_claimed;                  // pixels of the block claimed by subgroups so far
shared uint s_next[BLOCK];              // at a subgroup's first pixel: the next subgroup's first
shared uvec2 s_total[CHANNELS * BLOCK];  // at a subgroup's first pixel: its total per channel

uint bit_count64(uint64_t m) {
  uvec2 w = unpackUint2x32(m);
  return uint(bitCount(w.x) + bitCount(w.y));
}

uint lowest_bit64(uint64_t m) {
  uvec2 w = unpackUint2x32(m);
  return w.x != 0u ? uint(findLSB(w.x)) : 32u + uint(findLSB(w.y));
}

ACC acc_from64(uint64_t v) {
#if defined(FORCE_TWO_WORD)
  return unpackUint2x32(v);
#else
  return v;
#endif
}

void main() {
  uint tid = gl_LocalInvocationIndex;
  int line = int(gl_WorkGroupID.y);
  if (tid == 0u) s_claimed = 0u;
  memoryBarrierShared();
  barrier();

  uint64_t members = ballotARB(true);
  uint leader = lowest_bit64(members);
  uint size = bit_count64(members);
  uint first = 0u;
  if (gl_SubGroupInvocationARB == leader) first = atomicAdd(s_claimed, size);
  first = readInvocationARB(first, leader);  // leader: the same in every member
  uint i = first + bit_count64(members & gl_SubGroupLtMaskARB);
  int x = int(gl_WorkGroupID.x) * BLOCK + int(i);
  bool inside = x < u_line_len;
  uvec4 t = load_texel(u_origin + ivec2(inside ? x : 0, line));

  uint64_t below[CHANNELS];  // sum of the members below this one, per channel
  uint own[CHANNELS];
  for (int c = 0; c < CHANNELS; ++c) {
    uint v = inside ? t[c] : 0u;
#if defined(SQUARED)
    v = v * v;  // 65535^2 < 2^32
#endif
    own[c] = v;
    uint64_t b_below = 0ul, b_all = 0ul;
    for (int b = 0; b < BITS; ++b) {
      uint64_t m = ballotARB(((v >> uint(b)) & 1u) != 0u);
      b_below += widen_u64(bit_count64(m & gl_SubGroupLtMaskARB)) << uint(b);
      b_all += widen_u64(bit_count64(m)) << uint(b);
    }
    below[c] = b_below;
    if (gl_SubGroupInvocationARB == leader) s_total[c * BLOCK + int(first)] = unpackUint2x32(b_all);
  }
  if (gl_SubGroupInvocationARB == leader) s_next[first] = first + size;
  memoryBarrierShared();
  barrier();

  // The totals of the subgroups before this one's run: at most BLOCK / (subgroup size) of them.
  uint64_t before[CHANNELS];
  for (int c = 0; c < CHANNELS; ++c) before[c] = 0ul;
  for (uint j = 0u; j < first; j = s_next[j]) {
    for (int c = 0; c < CHANNELS; ++c) before[c] += packUint2x32(s_total[c * BLOCK + int(j)]);
  }
  if (tid == 0u) {  // the block's total: every subgroup's
    uint64_t all[CHANNELS];
    for (int c = 0; c < CHANNELS; ++c) all[c] = 0ul;
    for (uint j = 0u; j < uint(BLOCK); j = s_next[j]) {
      for (int c = 0; c < CHANNELS; ++c) all[c] += packUint2x32(s_total[c * BLOCK + int(j)]);
    }
    for (int c = 0; c < CHANNELS; ++c) {
      sums[(uint(line) * uint(u_nblocks) + gl_WorkGroupID.x) * uint(CHANNELS) + uint(c)] =
          unpackUint2x32(all[c]);
    }
  }
  if (!inside) return;
  uint base = (uint(line) * uint(u_line_len) + uint(x)) * uint(CHANNELS);
  for (int c = 0; c < CHANNELS; ++c) {  // inclusive: the members below, this one, the runs before
    table[base + uint(c)] = acc_store(acc_from64(before[c] + below[c] + widen_u64(own[c])));
  }
}

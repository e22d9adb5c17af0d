// One invocation per pixel of the band, aggregated per subgroup (a warp on NVIDIA) with ballots
// instead of a shared counter: the set bits of ballotARB(pass) are the subgroup's passing
// invocations; the lowest of them reserves a run of that many slots with one global atomicAdd and
// the others read the run's start from it (readInvocationARB); an invocation's slot in the run is
// the number of passing invocations below it in the subgroup. No shared memory, no barrier. The
// order of the list is arbitrary (the host orders it, as for the other atomic variants).
// The technique is warp-aggregated atomics (NVIDIA, "CUDA Pro Tip: Optimized Filtering with
// Warp-Aggregated Atomics", 2014), here with GL_ARB_shader_ballot's subgroups of any size up to 64.
#include "compaction_common.glsl"
#if !defined(HAVE_BALLOT)
#error "compaction_subgroup_aggregated needs GL_ARB_shader_ballot and 64-bit integers"
#endif

layout(local_size_x = 16, local_size_y = 16) in;

layout(std430, binding = 0) buffer Counters { uint counters[]; };  // one per band
#if !defined(COUNT_ONLY)
layout(std430, binding = 1) writeonly buffer Indices { uint indices[]; };
#endif
uniform int u_band;

uint bit_count64(uint64_t m) {
  uvec2 w = unpackUint2x32(m);
  return uint(bitCount(w.x) + bitCount(w.y));
}

uint lowest_bit64(uint64_t m) {
  uvec2 w = unpackUint2x32(m);
  return w.x != 0u ? uint(findLSB(w.x)) : 32u + uint(findLSB(w.y));
}

void main() {
  ivec2 p = ivec2(gl_GlobalInvocationID.x, int(gl_GlobalInvocationID.y) + u_row0);
  bool pass = p.x < u_size.x && p.y < u_row0 + u_rows && passes(p);
  uint64_t mask = ballotARB(pass);
  if (mask == uint64_t(0)) return;  // the same for the whole subgroup
  uint leader = lowest_bit64(mask);
  uint base = 0u;
  if (gl_SubGroupInvocationARB == leader) base = atomicAdd(counters[u_band], bit_count64(mask));
#if !defined(COUNT_ONLY)
  base = readInvocationARB(base, leader);  // leader: the same in every invocation of the subgroup
  if (pass) {
    indices[base + bit_count64(mask & gl_SubGroupLtMaskARB)] = (uint(p.y) << 16) | uint(p.x);
  }
#endif
}

// One invocation per pixel of the band; a passing pixel reserves its slot with one global
// atomicAdd and writes its key (y << 16) | x. The order of the list is arbitrary.
#include "compaction_common.glsl"

layout(local_size_x = 16, local_size_y = 16) in;

layout(std430, binding = 0) buffer Counters { uint counters[]; };  // one per band
#if !defined(COUNT_ONLY)
layout(std430, binding = 1) writeonly buffer Indices { uint indices[]; };
#endif
uniform int u_band;

void main() {
  ivec2 p = ivec2(gl_GlobalInvocationID.x, int(gl_GlobalInvocationID.y) + u_row0);
  if (p.x >= u_size.x || p.y >= u_row0 + u_rows) return;
  if (!passes(p)) return;
  uint slot = atomicAdd(counters[u_band], 1u);
#if !defined(COUNT_ONLY)
  indices[slot] = (uint(p.y) << 16) | uint(p.x);
#endif
}

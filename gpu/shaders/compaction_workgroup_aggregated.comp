// One invocation per pixel of the band; passing pixels take a slot in a shared counter, then one
// invocation reserves the workgroup's run with a single global atomicAdd and every passing pixel
// writes its key (y << 16) | x at run start + slot. The order of the list is arbitrary.
#include "compaction_common.glsl"

layout(local_size_x = 16, local_size_y = 16) in;

layout(std430, binding = 0) buffer Counters { uint counters[]; };  // one per band
#if !defined(COUNT_ONLY)
layout(std430, binding = 1) writeonly buffer Indices { uint indices[]; };
#endif
uniform int u_band;

shared uint s_count;
shared uint s_base;

void main() {
  if (gl_LocalInvocationIndex == 0u) s_count = 0u;
  barrier();
  ivec2 p = ivec2(gl_GlobalInvocationID.x, int(gl_GlobalInvocationID.y) + u_row0);
  bool pass = p.x < u_size.x && p.y < u_row0 + u_rows && passes(p);
  uint slot = 0u;
  if (pass) slot = atomicAdd(s_count, 1u);
  barrier();
  if (gl_LocalInvocationIndex == 0u && s_count != 0u) s_base = atomicAdd(counters[u_band], s_count);
  barrier();
#if !defined(COUNT_ONLY)
  if (pass) indices[s_base + slot] = (uint(p.y) << 16) | uint(p.x);
#endif
}

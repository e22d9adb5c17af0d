// Ordered scan, pass 3: each workgroup re-reads its block's pass bits, scans the invocations'
// counts, and writes the linear index (y * width + x) of every passing pixel at its block's
// offset + its rank in the block, so the list comes out in row-major order. Positions at or past
// u_cap are not written (a block wholly past it returns at once).
#include "compaction_block_scan.glsl"

layout(std430, binding = 1) writeonly buffer Indices { uint indices[]; };
layout(std430, binding = 2) readonly buffer BlockOffsets { uint block_offsets[]; };
layout(std430, binding = 3) readonly buffer PassBits { uint pass_bits[]; };
uniform uint u_first_index;  // linear index of the band's first pixel
uniform uint u_cap;          // list entries wanted from this band

void main() {
  uint b = flat_group_index();
  if (b >= u_num_groups) return;
  uint offset = block_offsets[b];
  if (offset >= u_cap) return;  // the same for the whole workgroup
  uint thread = b * kThreads + gl_LocalInvocationIndex;
  uint bits = pass_bits[thread];
  uint total;
  uint pos = offset + workgroup_exclusive_scan(uint(bitCount(bits)), total);
  uint index = u_first_index + thread * uint(PIXELS_PER_THREAD);
  while (bits != 0u && pos < u_cap) {
    int k = findLSB(bits);
    bits &= bits - 1u;
    indices[pos++] = index + uint(k);
  }
}

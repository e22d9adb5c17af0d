// Ordered scan, pass 3: each workgroup re-reads its block's pass bits, scans the invocations'
// counts, and writes the key (y << 16) | x of every passing pixel at its block's
// offset + its rank in the block, so the list comes out in row-major order. Positions at or past
// u_cap are not written (a block wholly past it returns at once).
#include "compaction_block_scan.glsl"

layout(std430, binding = 1) writeonly buffer Indices { uint indices[]; };
layout(std430, binding = 2) readonly buffer BlockOffsets { uint block_offsets[]; };
layout(std430, binding = 3) readonly buffer PassBits { uint pass_bits[]; };
uniform int u_row0;   // first row of the band
uniform int u_width;
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
  uint first = thread * uint(PIXELS_PER_THREAD);  // band-linear
  uint width = uint(u_width);
  uint x0 = first % width;
  uint y0 = uint(u_row0) + first / width;
  while (bits != 0u && pos < u_cap) {
    uint x = x0 + uint(findLSB(bits));
    uint y = y0;
    while (x >= width) {  // at most once unless the image is narrower than PIXELS_PER_THREAD
      x -= width;
      ++y;
    }
    bits &= bits - 1u;
    indices[pos++] = (y << 16) | x;
  }
}

// Work-efficient row scan (Blelloch up-sweep/down-sweep) in shared memory: one workgroup scans a
// block of BLOCK pixels of one line, every channel, and writes each block's total to `sums` (with
// several blocks per line, or a carry, scanned by integral_block_sums and added by
// integral_add_offsets).
// SRC_TEXTURE: lines are rows of the image; else lines are rows of the table, scanned in place.
#include "integral_common.glsl"

#define WG 256
#define BLOCK 512
#define PAD(i) ((i) + ((i) >> 5))  // one spare slot every 32 elements against bank conflicts
#define STRIDE (BLOCK + BLOCK / 32)

layout(local_size_x = WG) in;
layout(std430, binding = 0) buffer Table { uvec2 table[]; };
layout(std430, binding = 3) writeonly buffer Sums { uvec2 sums[]; };

uniform ivec2 u_origin;  // SRC_TEXTURE: image coordinates of line 0, pixel 0
uniform int u_line_len;  // pixels per line
uniform int u_nblocks;   // blocks per line

shared ACC s[CHANNELS * STRIDE];

void main() {
  int tid = int(gl_LocalInvocationID.x);
  int block = int(gl_WorkGroupID.x);
  int line = int(gl_WorkGroupID.y);
  int x0 = block * BLOCK;
  uint line_base = uint(line) * uint(u_line_len);

  ACC orig[2 * CHANNELS];
  for (int h = 0; h < 2; ++h) {
    int i = tid + h * WG;
    int x = x0 + i;
    bool inside = x < u_line_len;
#if defined(SRC_TEXTURE)
    TEXEL_T t = load_texel(u_origin + ivec2(inside ? x : 0, line));
#endif
    for (int c = 0; c < CHANNELS; ++c) {
      ACC v = acc_zero();
      if (inside) {
#if defined(SRC_TEXTURE)
        v = acc_sample(t[c]);
#else
        v = acc_load(table[(line_base + uint(x)) * uint(CHANNELS) + uint(c)]);
#endif
      }
      orig[h * CHANNELS + c] = v;
      s[c * STRIDE + PAD(i)] = v;
    }
  }

  int offset = 1;
  for (int d = BLOCK >> 1; d > 0; d >>= 1) {
    memoryBarrierShared();
    barrier();
    if (tid < d) {
      int ai = PAD(offset * (2 * tid + 1) - 1);
      int bi = PAD(offset * (2 * tid + 2) - 1);
      for (int c = 0; c < CHANNELS; ++c) {
        s[c * STRIDE + bi] = acc_add(s[c * STRIDE + bi], s[c * STRIDE + ai]);
      }
    }
    offset <<= 1;
  }
  memoryBarrierShared();
  barrier();
  if (tid == 0) {
    for (int c = 0; c < CHANNELS; ++c) {
      sums[(uint(line) * uint(u_nblocks) + uint(block)) * uint(CHANNELS) + uint(c)] =
          acc_store(s[c * STRIDE + PAD(BLOCK - 1)]);
      s[c * STRIDE + PAD(BLOCK - 1)] = acc_zero();
    }
  }
  for (int d = 1; d < BLOCK; d <<= 1) {
    offset >>= 1;
    memoryBarrierShared();
    barrier();
    if (tid < d) {
      int ai = PAD(offset * (2 * tid + 1) - 1);
      int bi = PAD(offset * (2 * tid + 2) - 1);
      for (int c = 0; c < CHANNELS; ++c) {
        ACC t = s[c * STRIDE + ai];
        s[c * STRIDE + ai] = s[c * STRIDE + bi];
        s[c * STRIDE + bi] = acc_add(s[c * STRIDE + bi], t);
      }
    }
  }
  memoryBarrierShared();
  barrier();

  for (int h = 0; h < 2; ++h) {
    int i = tid + h * WG;
    int x = x0 + i;
    if (x >= u_line_len) continue;
    for (int c = 0; c < CHANNELS; ++c) {  // exclusive prefix + own value = inclusive
      table[(line_base + uint(x)) * uint(CHANNELS) + uint(c)] =
          acc_store(acc_add(s[c * STRIDE + PAD(i)], orig[h * CHANNELS + c]));
    }
  }
}

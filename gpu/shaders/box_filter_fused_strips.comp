// One fused pass for 8-bit images on CPU renderers. Each invocation owns a strip of STRIP 16-byte
// texels of the packed image (rows as raw bytes, 16 per RGBA32UI texel) and a run of output rows.
// It keeps the vertical window sums of its strip's bytes, plus APRON texels each side, in a local
// array, moves them down one row per output row (add the row entering, take away the row
// leaving), slides the horizontal window over them byte by byte (a step of CHANNELS bytes is one
// pixel), divides exactly by a multiply-shift and writes whole uvec4 texels.
//
// Every array index is a compile-time constant (RX, STRIP and APRON are defines, and the code that
// touches the array is unrolled by the REP macros below: Mesa's GLSL compiler keeps loops of more
// than a few dozen instructions rolled), so the sums stay in registers: llvmpipe turns a local
// array indexed at run time into a chain of selects over all its elements.
// No texel is built from the horizontal border rule here: llvmpipe runs every branch and every
// loop body at least once for all lanes, so a per-texel border path costs every texel its price
// (it was two thirds of the pass). Strips whose texels all lie wholly inside the row (the
// interior) read the image itself; the few strips at the row's ends run as their own dispatch over
// a small side image that holds exactly their texels with the border applied
// (box_filter_fused_edges.comp), read the same way. The vertical border is one row index per row.
//
// Defines: CHANNELS, RX, STRIP (<= 8), APRON (>= ceil((RX + 1) * CHANNELS / 16)), WIDEV
// (vertical sums may pass 16 bits: one 32-bit field per byte instead of two 16-bit fields).
#include "box_filter_common.glsl"

layout(local_size_x = 8) in;

layout(binding = 0, rgba32ui) readonly uniform uimage2D u_packed;
// The output rows [u_band0, u_band0 + u_band_rows) in the packed layout: u_row_texels per row.
layout(std430, binding = 1) writeonly buffer OutTexels { uvec4 out_texels[]; };
// llvmpipe stops every loop of an invocation once their iterations add up to 65535 (gallivm's
// LP_MAX_TGSI_LOOP_ITERATIONS, shared by all loops). The host sizes the runs of rows to stay well
// under it; an invocation cut short anyway counts itself here, and the host runs again with
// shorter runs.
layout(std430, binding = 2) buffer Cut { uint cut_invocations; };

uniform int u_row_texels;   // texels per packed row
uniform int u_row_bytes;    // bytes of an image row (the rest of its last texel is padding)
uniform int u_rows;         // output rows per invocation
uniform int u_band0;
uniform int u_band_rows;
// floor((s + u_half) / area) as a multiply-high and a shift: the high word of (s + u_half) * u_mul,
// >> u_shift, exact for every window sum (box_filter_llvmpipe.cc plans the constants).
uniform uint u_mul;
uniform int u_shift;
uniform uint u_half;
uniform int u_two;  // 2: a loop the compiler cannot unroll, to see whether loops still run
// This dispatch's strips: invocation i runs strip (i mod u_strips), listed from u_strip0 on; with
// u_edges != 0 the first u_left of them are the row's first strips, the rest run from u_strip0 on,
// and the bound image is the side image of their texels (N per strip, in list order).
uniform int u_strips;
uniform int u_strip0;
uniform int u_left;
uniform int u_edges;

#define C CHANNELS
#define N (STRIP + 2 * APRON)  // texels of sums
#define A (RX * C)             // bytes from a window's centre to its edge
#if defined(WIDEV)
#define FIELDS 16  // per texel: one sum per byte, vs[16 t + byte]
#else
#define FIELDS 8  // per texel: bytes 0,2 and 1,3 of each word as 16-bit pairs, vs[8 t + 2 i + odd]
#endif
// Sized for the largest unrolled index (N <= 64 texels): unrolled code guarded off by a constant
// condition still has to index within bounds. Elements never used cost nothing.
uint vs[64 * FIELDS];

// Texel x of the bound image's row my (my < 0: a constant-border row).
uvec4 row_texel(int x, int my) {
  return my < 0 ? uvec4(u_const * 0x01010101u) : imageLoad(u_packed, ivec2(x, my));
}

// REPn(M, b): M(b) M(b + 1) ... M(b + n - 1), for code that must be unrolled.
#define REP4(M, b) M(b) M((b) + 1) M((b) + 2) M((b) + 3)
#define REP16(M, b) REP4(M, b) REP4(M, (b) + 4) REP4(M, (b) + 8) REP4(M, (b) + 12)
#define REP64(M, b) REP16(M, b) REP16(M, (b) + 16) REP16(M, (b) + 32) REP16(M, (b) + 48)

// vs = (first ? 0 : vs) + row my_add - row my_sub (no row when has_sub is false), over texels
// [x0, x0 + N) of the bound image's row.
// X4 is REP4 for code inside a REP expansion (a macro does not expand inside its own expansion).
#define X4(M, b) M(b) M((b) + 1) M((b) + 2) M((b) + 3)
#if defined(WIDEV)
#define MOVE_BYTE(i, k)                                                       \
  vs[t * 16 + (i) * 4 + (k)] = (first ? 0u : vs[t * 16 + (i) * 4 + (k)]) +    \
                               bitfieldExtract(a[i], 8 * (k), 8) -            \
                               bitfieldExtract(s[i], 8 * (k), 8);
#define MOVE_WORD(i) MOVE_BYTE(i, 0) MOVE_BYTE(i, 1) MOVE_BYTE(i, 2) MOVE_BYTE(i, 3)
#else
// Two bytes per 32-bit word as 16-bit fields: the sums stay below 2^16 (WIDEV otherwise), so no
// carry or borrow crosses a field when the entering row is added before the leaving one is taken
// away.
#define MOVE_WORD(i)                                                                 \
  vs[t * 8 + (i) * 2] = (first ? 0u : vs[t * 8 + (i) * 2]) + ae[i] - se[i];          \
  vs[t * 8 + (i) * 2 + 1] = (first ? 0u : vs[t * 8 + (i) * 2 + 1]) + ao[i] - so[i];
#endif
#define MOVE_TEXEL(T)                                                                \
  if ((T) < N) {                                                                     \
    const int t = (T);                                                               \
    uvec4 a = row_texel(x0 + t, my_add);                                             \
    uvec4 s = has_sub ? row_texel(x0 + t, my_sub) : uvec4(0);                        \
    uvec4 ae = a & 0x00FF00FFu, ao = (a >> 8u) & 0x00FF00FFu;                        \
    uvec4 se = s & 0x00FF00FFu, so = (s >> 8u) & 0x00FF00FFu;                        \
    X4(MOVE_WORD, 0)                                                                 \
  }
void move_rows(int x0, int my_add, int my_sub, bool has_sub, bool first) {
#if N <= 16
  REP16(MOVE_TEXEL, 0)
#else
  REP64(MOVE_TEXEL, 0)
#endif
}

// The vertical sum of byte j of the array (a constant wherever it is called).
uint vcol(int j) {
#if defined(WIDEV)
  return vs[j];
#else
  return (vs[(j >> 2) * 2 + (j & 1)] >> uint((j & 2) << 3)) & 0xFFFFu;
#endif
}

uint divide(uint s) {
  uint hi, lo;
  umulExtended(s + u_half, u_mul, hi, lo);
  return hi >> uint(u_shift);
}

void store_texel(int out_row, int tx, uvec4 o) {
  if (tx >= u_row_texels) return;
  // The packed form's rows end in zero bytes.
  int pad = 16 * (tx + 1) - u_row_bytes;
  for (int q = 0; q < 4; ++q) {
    int keep = clamp(16 - pad - 4 * q, 0, 4);
    o[q] &= keep == 4 ? 0xFFFFFFFFu : (1u << uint(8 * keep)) - 1u;
  }
  out_texels[out_row + tx] = o;
}

void main() {
  int i = int(gl_GlobalInvocationID.x);
  int run = i / u_strips;
  int k = i - run * u_strips;
  int strip = u_edges != 0 && k < u_left ? k : u_strip0 + k - (u_edges != 0 ? u_left : 0);
  int tx0 = strip * STRIP;  // first output texel
  int ya = u_band0 + run * u_rows;
  int yb = min(ya + u_rows, u_band0 + u_band_rows);
  if (tx0 >= u_row_texels || ya >= yb) return;
  int x0 = u_edges != 0 ? k * N : tx0 - APRON;  // the strip's first texel in the bound image

  // One loop, one copy of the unrolled row move (its code, and so the compile time and the
  // driver's cache space, is most of the program): y is the row whose window the move completes;
  // before ya the moves only fill the sums.
  int rows_done = 0;
  for (int y = ya - 2 * u_ry; y < yb; ++y) {
    move_rows(x0, map_index(y + u_ry, u_size.y), map_index(y - u_ry - 1, u_size.y), y > ya,
              y == ya - 2 * u_ry);
    if (y < ya) continue;
    // h[k]: the window sum of array byte 16 APRON - C + k, the C bytes before the strip.
    uint h[4];  // only h[0, C) is used
    h[0] = h[1] = h[2] = h[3] = 0u;
#define RAMP_CHANNEL(k) \
  if ((k) < C) h[k] += vcol(16 * APRON - C + (k) + (w - RX) * C);
#define RAMP(W)             \
  if ((W) <= 2 * RX) {      \
    const int w = (W);      \
    X4(RAMP_CHANNEL, 0)     \
  }
    // Only as many copies as the window needs: every copy costs compile time.
#if 2 * RX < 16
    REP16(RAMP, 0)
#elif 2 * RX < 64
    REP64(RAMP, 0)
#else
    REP64(RAMP, 0)
    REP64(RAMP, 64)
#endif
    int out_row = (y - u_band0) * u_row_texels;
    uvec4 o;
    // Output byte B of the strip: array byte j.
#define OUT_BYTE(B)                                                                  \
  if ((B) < 16 * STRIP) {                                                            \
    const int j = 16 * APRON + (B);                                                  \
    if (((B) & 15) == 0) o = uvec4(0);                                               \
    uint s = h[0] + vcol(j + A) - vcol(j - A - C);                                   \
    if (C > 1) h[0] = h[1];                                                          \
    if (C > 2) h[1] = h[2];                                                          \
    if (C > 3) h[2] = h[3];                                                          \
    h[C - 1] = s;                                                                    \
    o[((B) >> 2) & 3] |= divide(s) << uint(8 * ((B) & 3));                           \
    if (((B) & 15) == 15) store_texel(out_row, tx0 + ((B) >> 4), o);                 \
  }
#if STRIP <= 4
    REP64(OUT_BYTE, 0)
#else
    REP64(OUT_BYTE, 0)
    REP64(OUT_BYTE, 64)
#endif
    ++rows_done;
  }
  int probe = 0;
  for (int q = 0; q < u_two; ++q) ++probe;
  if (rows_done != yb - ya || probe != 2) atomicAdd(cut_invocations, 1u);
}

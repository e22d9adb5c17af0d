// One fused pass for 8-bit images on CPU renderers. Each invocation owns a strip of STRIP 16-byte
// texels of the packed image (rows as raw bytes, 16 per RGBA32UI texel) and a run of output rows.
// It keeps the vertical window sums of its strip's bytes, plus APRON texels each side, in a local
// array, moves them down one row per output row (add the row entering, take away the row
// leaving), slides the horizontal window over them byte by byte (a step of CHANNELS bytes is one
// pixel), divides exactly by a multiply-shift and writes whole 16-byte texels.
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
// Two ways to place the sums, chosen by defines:
// - RX compiled in (RX, APRON >= ceil((RX + 1) * CHANNELS / 16), STRIP <= 8): one array of the
//   strip's texels plus APRON each side; the window's edges are constant offsets into it.
// - RX a uniform (RUNTIME_RX, for wider windows: one program serves every rx whose window edge
//   falls at the same byte of a texel): two arrays of STRIP + 1 texels, one under the windows'
//   trailing edges (the bytes A + C before each output byte, A = rx * CHANNELS) and one under their
//   leading edges (A bytes after). The texels they read are u_trail_dx and u_lead_dx texels from
//   the strip's own, run-time offsets that cost nothing; the byte within the texel where each
//   array's first edge falls, TRAIL_BYTE and LEAD_BYTE, is compiled in, so every index into the
//   arrays is still a constant. Each row's first window (the C bytes before the strip) is kept
//   as a running sum of its own, moved down a row at a time like the arrays: the window's
//   u_window_texels texels of the row entering it, from the trailing array's first (those of the
//   array summed as they are moved, the rest by a loop, GROUP per iteration), whose bytes fall
//   into one class per channel (one class per byte for C = 3, whose pixels straddle texels: a
//   group of three texels holds whole pixels); the row leaving it gives back the sums it
//   brought, kept in a ring of 2 u_ry + 1 slots. So the strip need not be as wide as the window,
//   and its program stays small (it compiles in a fraction of a second; one as wide as the
//   widest window took seconds).
// Both: CHANNELS, STRIP, WIDEV (vertical sums may pass 16 bits: one 32-bit field per byte
// instead of two 16-bit fields; not with RUNTIME_RX).
#include "box_filter_common.glsl"

layout(local_size_x = 8) in;

layout(binding = 0, rgba32ui) readonly uniform uimage2D u_packed;
// The output rows [u_band0, u_band0 + u_band_rows) in the packed layout: u_row_texels per row.
layout(std430, binding = 1) writeonly buffer OutTexels { uvec4 out_texels[]; };
#if defined(HAVE_INT64)
// The same buffer as 64-bit pairs (as_u64_pair, prelude.glsl).
layout(std430, binding = 1) writeonly buffer OutTexels64 { u64vec2 out_texels64[]; };
#endif
// llvmpipe stops every loop of an invocation once their iterations add up to 65535 (gallivm's
// LP_MAX_TGSI_LOOP_ITERATIONS, shared by all loops). The host sizes the runs of rows to stay well
// under it; an invocation cut short anyway counts itself here, and the host runs again with
// shorter runs.
layout(std430, binding = 2) buffer Cut { uint cut_invocations; };
#if defined(RUNTIME_RX)
// Each row's sums over the first window's bytes, kept while the row is in the window (2 u_ry + 1
// moves): when it leaves, they come back from here instead of being summed again, which halves
// the window's image loads. This dispatch's invocation g uses ring[g * (2 u_ry + 1) + slot].
layout(std430, binding = 3) buffer Ring { uvec4 ring[]; };
#endif

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
uniform int u_inv0;  // the invocation this dispatch's first one stands for (a pass in parts)
// This dispatch's strips: invocation i runs strip (i mod u_strips), listed from u_strip0 on; with
// u_edges != 0 the first u_left of them are the row's first strips, the rest run from u_strip0 on,
// and the bound image is the side image of their texels (TEXELS per strip, in list order).
uniform int u_strips;
uniform int u_strip0;
uniform int u_left;
uniform int u_edges;
#if defined(RUNTIME_RX)
uniform int u_trail_dx;      // the trailing array's first texel, from the strip's first
uniform int u_lead_dx;       // the leading array's
uniform int u_texels;          // edge strips: texels per strip in the side image
uniform int u_window_texels;   // texels holding a row's first window, from the trailing array's first
uniform uvec4 u_last_mask;     // the bytes of the last of them inside the window
#endif

#define C CHANNELS
#if defined(RUNTIME_RX)
#define NA (STRIP + 1)  // texels of each array
#else
#define N (STRIP + 2 * APRON)  // texels of sums
#define TEXELS N
#define A (RX * C)             // bytes from a window's centre to its edge
#endif
#if defined(WIDEV)
#define FIELDS 16  // per texel: one sum per byte, vs[16 t + byte]
#else
#define FIELDS 8  // per texel: bytes 0,2 and 1,3 of each word as 16-bit pairs, vs[8 t + 2 i + odd]
#endif
// Sized for the largest unrolled index (64 texels): unrolled code guarded off by a constant
// condition still has to index within bounds. Elements never used cost nothing.
#if defined(RUNTIME_RX)
uint vt[64 * FIELDS];  // under the trailing edges
uint vl[64 * FIELDS];  // under the leading edges
#else
uint vs[64 * FIELDS];
#endif

// Texel x of the bound image's row my (my < 0: a constant-border row).
uvec4 row_texel(int x, int my) {
  return my < 0 ? uvec4(u_const * 0x01010101u) : imageLoad(u_packed, ivec2(x, my));
}

// REPn(M, b): M(b) M(b + 1) ... M(b + n - 1), for code that must be unrolled.
#define REP4(M, b) M(b) M((b) + 1) M((b) + 2) M((b) + 3)
#define REP16(M, b) REP4(M, b) REP4(M, (b) + 4) REP4(M, (b) + 8) REP4(M, (b) + 12)
#define REP64(M, b) REP16(M, b) REP16(M, (b) + 16) REP16(M, (b) + 32) REP16(M, (b) + 48)
// REP_STRIP(M): M(B) for at least every byte B of a strip's output (M guards B < 16 STRIP), in
// whole copies of 64: every copy costs compile time.
#if STRIP > 20
#error "REP_STRIP unrolls at most 20 texels"
#elif STRIP > 16
#define REP_STRIP(M) REP64(M, 0) REP64(M, 64) REP64(M, 128) REP64(M, 192) REP64(M, 256)
#elif STRIP > 8
#define REP_STRIP(M) REP64(M, 0) REP64(M, 64) REP64(M, 128) REP64(M, 192)
#elif STRIP > 4
#define REP_STRIP(M) REP64(M, 0) REP64(M, 64)
#else
#define REP_STRIP(M) REP64(M, 0)
#endif

// vs = (first ? 0 : vs) + row my_add - row my_sub (no row when has_sub is false), over texels
// [x0, x0 + N) of the bound image's row.
// X4 is REP4 for code inside a REP expansion (a macro does not expand inside its own expansion).
#define X4(M, b) M(b) M((b) + 1) M((b) + 2) M((b) + 3)
#if defined(WIDEV)
#define MOVE_BYTE(V, i, k)                                                   \
  V[t * 16 + (i) * 4 + (k)] = (first ? 0u : V[t * 16 + (i) * 4 + (k)]) +    \
                              bitfieldExtract(a[i], 8 * (k), 8) -           \
                              bitfieldExtract(s[i], 8 * (k), 8);
#define MOVE_WORD(V, i) MOVE_BYTE(V, i, 0) MOVE_BYTE(V, i, 1) MOVE_BYTE(V, i, 2) MOVE_BYTE(V, i, 3)
#else
// Two bytes per 32-bit word as 16-bit fields: the sums stay below 2^16 (WIDEV otherwise), so no
// carry or borrow crosses a field when the entering row is added before the leaving one is taken
// away.
#define MOVE_WORD(V, i)                                                              \
  V[t * 8 + (i) * 2] = (first ? 0u : V[t * 8 + (i) * 2]) + ae[i] - se[i];            \
  V[t * 8 + (i) * 2 + 1] = (first ? 0u : V[t * 8 + (i) * 2 + 1]) + ao[i] - so[i];
#endif
// THEN: more to do with the texel of the entering row (a, split into ae and ao), or nothing.
#define MOVE_TEXEL(V, X, T, COUNT, THEN)                                             \
  if ((T) < (COUNT)) {                                                               \
    const int t = (T);                                                               \
    uvec4 a = row_texel((X) + t, my_add);                                            \
    uvec4 s = has_sub ? row_texel((X) + t, my_sub) : uvec4(0);                       \
    uvec4 ae = a & 0x00FF00FFu, ao = (a >> 8u) & 0x00FF00FFu;                        \
    uvec4 se = s & 0x00FF00FFu, so = (s >> 8u) & 0x00FF00FFu;                        \
    MOVE_WORD(V, 0) MOVE_WORD(V, 1) MOVE_WORD(V, 2) MOVE_WORD(V, 3)                  \
    THEN                                                                             \
  }
#define NOTHING
#if defined(RUNTIME_RX)
// The first window's running sums: win[k] (k < C) is the window sum of the strip's byte k - C,
// over bytes [b0, b0 + (2 rx + 1) C) of the rows, b0 = 16 xt + TRAIL_BYTE; moved down a row with
// the arrays (add row my_add, take away the row leaving when has_sub). Byte 16 i + 4 q + k of a
// group of texels is in class (i + q + k) mod 3 for C = 3 (the classes of a word kept apart by
// p = (i + q) mod 3), k mod C otherwise; class c holds the sums of window byte
// (c - TRAIL_BYTE) mod C. The window starts at the trailing array's first texel, so the array's
// texels of the entering row, already read, are summed as they are moved (WIN_ADD), and only the
// window's texels past the array are read for it (move_rows): at rx = 32 and 4 channels, 8
// reads a row instead of 17.
#if C == 3
#define GROUP 3
#define P 3
#if NA % 3 != 0
#error "the trailing array must hold whole groups of three texels"
#endif
#else
#define GROUP 2
#define P 1
#endif
#define REL(c) (((c) + 16 * C - TRAIL_BYTE) % C)
// Bytes of the first texel at or past TRAIL_BYTE.
#define KEEP_FROM(q) ((TRAIL_BYTE) <= 4 * (q) ? 0xFFFFFFFFu : (TRAIL_BYTE) >= 4 * (q) + 4 ? 0u : (0xFFFFFFFFu << uint(8 * ((TRAIL_BYTE) - 4 * (q)))))
// The bytes of texel t of the window (t from its first) inside it.
uvec4 window_mask(int t) {
  return t == 0 ? uvec4(KEEP_FROM(0), KEEP_FROM(1), KEEP_FROM(2), KEEP_FROM(3))
                : t < u_window_texels - 1 ? uvec4(0xFFFFFFFFu)
                                          : t == u_window_texels - 1 ? u_last_mask : uvec4(0u);
}
// Texel I (0 <= I < GROUP) of a group: its words' bytes into the class sums. Only with C = 3 does
// a texel's class offset depend on I: there NA is a multiple of 3 (checked above), so the loop's
// groups start at texels 3j from the window's first, and I is the place mod 3 throughout.
#define WIN_WORD(I, Q, E, O)             \
  ea[((I) + (Q)) % P] += (E);            \
  oa[((I) + (Q)) % P] += (O);
#define WIN_ADD                                                                      \
  {                                                                                  \
    uvec4 m = window_mask(t);                                                        \
    uvec4 mo = m >> 8u;                                                              \
    WIN_WORD(t % GROUP, 0, ae[0] & m[0], ao[0] & mo[0])                              \
    WIN_WORD(t % GROUP, 1, ae[1] & m[1], ao[1] & mo[1])                              \
    WIN_WORD(t % GROUP, 2, ae[2] & m[2], ao[2] & mo[2])                              \
    WIN_WORD(t % GROUP, 3, ae[3] & m[3], ao[3] & mo[3])                              \
  }
#define WIN_TEXEL(I)                                                                         \
  if ((I) < GROUP) {                                                                         \
    uvec4 a = row_texel(x + (I), my_add) & window_mask(x + (I) - xt);                        \
    WIN_WORD(I, 0, a[0] & 0x00FF00FFu, (a[0] >> 8u) & 0x00FF00FFu)                           \
    WIN_WORD(I, 1, a[1] & 0x00FF00FFu, (a[1] >> 8u) & 0x00FF00FFu)                           \
    WIN_WORD(I, 2, a[2] & 0x00FF00FFu, (a[2] >> 8u) & 0x00FF00FFu)                           \
    WIN_WORD(I, 3, a[3] & 0x00FF00FFu, (a[3] >> 8u) & 0x00FF00FFu)                           \
  }
// Fields 16 bits wide: a row's bytes of one class in the window, at most 65 pixels' worth.
#define WIN_CLASS(p)                                           \
  if ((p) < P) {                                               \
    enter[REL(p)] += ea[p] & 0xFFFFu;                          \
    enter[REL((p) + 1)] += oa[p] & 0xFFFFu;                    \
    enter[REL((p) + 2)] += ea[p] >> 16u;                       \
    enter[REL((p) + 3)] += oa[p] >> 16u;                       \
  }

#define MOVE_T(T) MOVE_TEXEL(vt, xt, T, NA, WIN_ADD)
#define MOVE_L(T) MOVE_TEXEL(vl, xl, T, NA, NOTHING)
// Moves the arrays and the first window's sums down a row: adds the entering row's sums over the
// window's bytes to win, and takes away those of the row leaving (has_sub), which entered
// 2 u_ry + 1 moves ago into the same ring slot.
void move_rows(int xt, int xl, int my_add, int my_sub, bool has_sub, bool first, uint slot,
               inout uvec4 win) {
  uint ea[3], oa[3];
  ea[0] = ea[1] = ea[2] = oa[0] = oa[1] = oa[2] = 0u;
#if NA <= 16
  REP16(MOVE_T, 0)
  REP16(MOVE_L, 0)
#else
  REP64(MOVE_T, 0)
  REP64(MOVE_L, 0)
#endif
  // The window's texels past the trailing array.
  int x_last = xt + u_window_texels - 1;
  for (int x = xt + NA; x <= x_last; x += GROUP) {
    WIN_TEXEL(0) WIN_TEXEL(1) WIN_TEXEL(2)
  }
  uvec4 enter = uvec4(0u);
  WIN_CLASS(0) WIN_CLASS(1) WIN_CLASS(2)
  uvec4 leave = has_sub ? ring[slot] : uvec4(0u);
  ring[slot] = enter;
  win += enter - leave;
}
#else
#define MOVE_S(T) MOVE_TEXEL(vs, x0, T, N, NOTHING)
void move_rows(int x0, int my_add, int my_sub, bool has_sub, bool first) {
#if N <= 16
  REP16(MOVE_S, 0)
#else
  REP64(MOVE_S, 0)
#endif
}
#endif

// The vertical sum of byte j of array V (j a constant wherever it is used).
#if defined(WIDEV)
#define VCOL(V, j) V[j]
#else
#define VCOL(V, j) ((V[((j) >> 2) * 2 + ((j) & 1)] >> uint(((j) & 2) << 3)) & 0xFFFFu)
#endif
#if defined(RUNTIME_RX)
#define LEAD(B) VCOL(vl, LEAD_BYTE + (B))    // column A bytes after output byte B
#define TRAIL(B) VCOL(vt, TRAIL_BYTE + (B))  // column A + C bytes before it
#else
#define LEAD(B) VCOL(vs, 16 * APRON + (B) + A)
#define TRAIL(B) VCOL(vs, 16 * APRON + (B) - A - C)
#endif

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
#if defined(HAVE_INT64)
  out_texels64[out_row + tx] = as_u64_pair(o);
#else
  out_texels[out_row + tx] = o;
#endif
}

void main() {
  int i = u_inv0 + int(gl_GlobalInvocationID.x);
  int run = i / u_strips;
  int k = i - run * u_strips;
  int strip = u_edges != 0 && k < u_left ? k : u_strip0 + k - (u_edges != 0 ? u_left : 0);
  int tx0 = strip * STRIP;  // first output texel
  int ya = u_band0 + run * u_rows;
  int yb = min(ya + u_rows, u_band0 + u_band_rows);
  if (tx0 >= u_row_texels || ya >= yb) return;
  // The strip's first texels in the bound image.
#if defined(RUNTIME_RX)
  int xt = u_edges != 0 ? k * u_texels : tx0 + u_trail_dx;
  int xl = xt + u_lead_dx - u_trail_dx;
  uvec4 win = uvec4(0u);
  const uint ring_slots = uint(2 * u_ry + 1);
  const uint ring0 = gl_GlobalInvocationID.x * ring_slots;
  uint slot = 0u;  // the move's slot, counted modulo ring_slots
#else
  int x0 = u_edges != 0 ? k * TEXELS : tx0 - APRON;
#endif

  // One loop, one copy of the unrolled row move (its code, and so the compile time and the
  // driver's cache space, is most of the program): y is the row whose window the move completes;
  // before ya the moves only fill the sums.
  int rows_done = 0;
  for (int y = ya - 2 * u_ry; y < yb; ++y) {
    int my_add = map_index(y + u_ry, u_size.y), my_sub = map_index(y - u_ry - 1, u_size.y);
#if defined(RUNTIME_RX)
    move_rows(xt, xl, my_add, my_sub, y > ya, y == ya - 2 * u_ry, ring0 + slot, win);
    slot = slot + 1u == ring_slots ? 0u : slot + 1u;
#else
    move_rows(x0, my_add, my_sub, y > ya, y == ya - 2 * u_ry);
#endif
    if (y < ya) continue;
    // h[k]: the window sum of the strip's byte k - C, one of the C bytes before the strip.
    uint h[4];  // only h[0, C) is used
    h[0] = h[1] = h[2] = h[3] = 0u;
#if defined(RUNTIME_RX)
    h[0] = win[0];
    h[1] = win[1];
    h[2] = win[2];
    h[3] = win[3];
#else
#define RAMP_CHANNEL(k) \
  if ((k) < C) h[k] += VCOL(vs, 16 * APRON - C + (k) + (w - RX) * C);
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
#endif
    int out_row = (y - u_band0) * u_row_texels;
    uvec4 o;
    // Output byte B of the strip.
#define OUT_BYTE(B)                                                                  \
  if ((B) < 16 * STRIP) {                                                            \
    if (((B) & 15) == 0) o = uvec4(0);                                               \
    uint s = h[0] + LEAD(B) - TRAIL(B);                                              \
    if (C > 1) h[0] = h[1];                                                          \
    if (C > 2) h[1] = h[2];                                                          \
    if (C > 3) h[2] = h[3];                                                          \
    h[C - 1] = s;                                                                    \
    o[((B) >> 2) & 3] |= divide(s) << (u_sample_bits * uint((B) & 3));               \
    if (((B) & 15) == 15) store_texel(out_row, tx0 + ((B) >> 4), o);                 \
  }
    REP_STRIP(OUT_BYTE)
    ++rows_done;
  }
  int probe = 0;
  for (int q = 0; q < u_two; ++q) ++probe;
  if (rows_done != yb - ya || probe != 2) atomicAdd(cut_invocations, 1u);
}

// Box filter from the integral image of the source rectangle the tile reads (`table`, origin
// u_src0, u_src_size): each window sum is a signed combination of table entries, at most 12 per
// axis and 4 per axis inside the image, whatever the radius. Border modes become index
// arithmetic: replicate adds the edge sample times the outside count; reflect-101 adds the
// reflected in-image interval(s), and for windows longer than the image whole periods of
// (2 x the line sum - both end samples); constant adds the value times the outside area.
#include "box_filter_common.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 1) readonly buffer Table { uvec2 table[]; };

uniform ivec2 u_src0;
uniform ivec2 u_src_size;

// Each axis gives at most 12 terms (coefficient, prefix index relative to the source rectangle)
// in fixed slots, so that every write to the term arrays has a constant index (dynamically
// indexed private arrays compile slowly on llvmpipe); unused slots have coefficient 0.
#define SLOTS 12
uniform int u_pixels;  // 4, as a uniform so that the pixel loop stays a loop

void set_term(inout int coef[SLOTS], inout int at[SLOTS], int slot, int k, int index, int lo) {
  if (index - lo < 0) return;  // the prefix before the rectangle is zero
  coef[slot] = k;
  at[slot] = index - lo;
}

// E(e) = sum over extended indices [0, e] (minus [e + 1, -1] for e < -1) of the mapped samples,
// for reflect-101 with period p = 2n - 2: q whole periods (F(n-1) + F(n-2) - F(0) each) and E0(s).
void set_periodic(inout int coef[SLOTS], inout int at[SLOTS], int base, int e, int sign, int n,
                  int lo) {
  int p = 2 * n - 2;
  int q = (e + 1) >= 0 ? (e + 1) / p : -((-(e + 1) + p - 1) / p);
  int s = e - q * p;  // in [-1, p - 1)
  if (q != 0) {
    set_term(coef, at, base, sign * q, n - 1, lo);
    set_term(coef, at, base + 1, sign * q, n - 2, lo);
    set_term(coef, at, base + 2, -sign * q, 0, lo);
  }
  if (s >= 0 && s <= n - 1) {
    set_term(coef, at, base + 3, sign, s, lo);
  } else if (s >= n) {
    set_term(coef, at, base + 3, sign, n - 1, lo);
    set_term(coef, at, base + 4, sign, n - 2, lo);
    set_term(coef, at, base + 5, -sign, p - s - 1, lo);
  }
}

// The window [c - r, c + r] of an axis of n samples as prefix terms; `inside` gets the count of
// in-image indices (for kConstant), `used` one past the last slot in use.
void axis_terms(int c, int r, int n, int lo, out int coef[SLOTS], out int at[SLOTS],
                out int inside, out int used) {
  for (int i = 0; i < SLOTS; ++i) {
    coef[i] = 0;
    at[i] = 0;
  }
  int a = c - r, b = c + r;
  int ia = max(a, 0), ib = min(b, n - 1);
  inside = ib - ia + 1;
  if ((a >= 0 && b < n) || u_border == BORDER_CONSTANT) {
    set_term(coef, at, 0, 1, ib, lo);
    set_term(coef, at, 1, -1, ia - 1, lo);
  } else if (u_border == BORDER_REPLICATE) {
    set_term(coef, at, 0, 1, ib, lo);
    set_term(coef, at, 1, -1, ia - 1, lo);
    if (a < 0) set_term(coef, at, 2, -a, 0, lo);
    if (b > n - 1) {
      set_term(coef, at, 3, b - n + 1, n - 1, lo);
      set_term(coef, at, 4, -(b - n + 1), n - 2, lo);
    }
  } else if (n == 1) {
    set_term(coef, at, 0, 2 * r + 1, 0, lo);
  } else if (r <= n - 1) {  // at most one reflection on each side
    set_term(coef, at, 0, 1, ib, lo);
    set_term(coef, at, 1, -1, ia - 1, lo);
    if (a < 0) {  // [a, -1] reads [1, -a]
      set_term(coef, at, 2, 1, -a, lo);
      set_term(coef, at, 3, -1, 0, lo);
    }
    if (b > n - 1) {  // [n, b] reads [2n - 2 - b, n - 2]
      set_term(coef, at, 4, 1, n - 2, lo);
      set_term(coef, at, 5, -1, 2 * n - 3 - b, lo);
    }
  } else {
    set_periodic(coef, at, 0, b, 1, n, lo);
    set_periodic(coef, at, 6, a - 1, -1, n, lo);
  }
  used = 0;
  for (int i = 0; i < SLOTS; ++i) {
    if (coef[i] != 0) used = i + 1;
  }
}

// Table arithmetic on all channels at once: modulo 2^64 for integer images (the window sum itself
// is below 2^53), double for float images.
#if defined(FMT_FLOAT)
#define TV dvec4
TV tzero() { return dvec4(0.0lf); }
TV tload(uint i) {  // through an array: see box_filter_common.glsl
  double v[4] = double[4](0.0lf, 0.0lf, 0.0lf, 0.0lf);
  for (int c = 0; c < CHANNELS; ++c) v[c] = packDouble2x32(table[i + uint(c)]);
  return dvec4(v[0], v[1], v[2], v[3]);
}
TV tmul(TV v, int k) {
  precise TV r = v * double(k);
  return r;
}
TV tadd(TV a, TV b) {
  precise TV r = a + b;
  return r;
}
dvec4 tdouble(TV v) { return v; }
#elif defined(HAVE_INT64) && !defined(FORCE_TWO_WORD)
#define TV u64vec4
TV tzero() { return u64vec4(0ul); }
TV tload(uint i) {
  TV v = tzero();
  for (int c = 0; c < CHANNELS; ++c) v[c] = packUint2x32(table[i + uint(c)]);
  return v;
}
TV tmul(TV v, int k) { return v * uint64_t(int64_t(k)); }
TV tadd(TV a, TV b) { return a + b; }
dvec4 tdouble(TV v) { return dvec4(v); }
#else
struct TV {  // two words per channel
  uvec4 lo;
  uvec4 hi;
};
TV tzero() { return TV(uvec4(0u), uvec4(0u)); }
TV tload(uint i) {
  TV v = tzero();
  for (int c = 0; c < CHANNELS; ++c) {
    v.lo[c] = table[i + uint(c)].x;
    v.hi[c] = table[i + uint(c)].y;
  }
  return v;
}
TV tmul(TV v, int k) {  // k sign-extended to 64 bits
  uvec4 hi, lo;
  umulExtended(v.lo, uvec4(uint(k)), hi, lo);
  hi += v.hi * uint(k) + (k < 0 ? v.lo * 0xffffffffu : uvec4(0u));
  return TV(lo, hi);
}
TV tadd(TV a, TV b) {
  uvec4 carry;
  uvec4 lo = uaddCarry(a.lo, b.lo, carry);
  return TV(lo, a.hi + b.hi + carry);
}
dvec4 tdouble(TV v) { return dvec4(v.hi) * 4294967296.0lf + dvec4(v.lo); }
#endif

shared uvec4 s_res[64 * 4];

uint tindex(int ty, int tx) {
  return (uint(ty) * uint(u_src_size.x) + uint(tx)) * uint(CHANNELS);
}

void main() {
  int px0 = int(gl_GlobalInvocationID.x) * 4;
  int y = int(gl_GlobalInvocationID.y);
  if (px0 >= u_tile_size.x || y >= u_tile_size.y) return;
  uint me = gl_LocalInvocationIndex * 4u;
  int gx0 = u_tile0.x + px0, gy = u_tile0.y + y;
  // Inside the image and past the rectangle's first row and column (whose prefix is zero).
  if (gx0 - u_rx - 1 >= u_src0.x && gx0 + 3 + u_rx < u_size.x && gy - u_ry - 1 >= u_src0.y &&
      gy + u_ry < u_size.y && px0 + 3 < u_tile_size.x) {
    // The usual case: four table entries per pixel.
    int top = gy - u_ry - 1 - u_src0.y, bottom = gy + u_ry - u_src0.y;
    for (int p = 0; p < u_pixels; ++p) {
      int left = gx0 + p - u_rx - 1 - u_src0.x, right = gx0 + p + u_rx - u_src0.x;
      TV sum = tadd(tadd(tload(tindex(bottom, right)), tmul(tload(tindex(bottom, left)), -1)),
                    tadd(tload(tindex(top, left)), tmul(tload(tindex(top, right)), -1)));
      s_res[me + uint(p)] = finish(tdouble(sum));
    }
    store4(px0, y, s_res[me], s_res[me + 1u], s_res[me + 2u], s_res[me + 3u]);
    return;
  }
  int cy[SLOTS], ay[SLOTS], cx[SLOTS], ax[SLOTS];
  int in_y, in_x, used_y, used_x;
  axis_terms(u_tile0.y + y, u_ry, u_size.y, u_src0.y, cy, ay, in_y, used_y);
  for (int p = 0; p < u_pixels; ++p) {
    int x = min(px0 + p, u_tile_size.x - 1);  // pixels past the tile only pad the row
    axis_terms(u_tile0.x + x, u_rx, u_size.x, u_src0.x, cx, ax, in_x, used_x);
    TV sum = tzero();
    for (int i = 0; i < used_x; ++i) {
      if (cx[i] == 0) continue;
      TV col = tzero();  // the y-combination at prefix column ax[i]
      for (int j = 0; j < used_y; ++j) {
        if (cy[j] == 0) continue;
        uint k = (uint(ay[j]) * uint(u_src_size.x) + uint(ax[i])) * uint(CHANNELS);
        col = tadd(col, tmul(tload(k), cy[j]));
      }
      sum = tadd(sum, tmul(col, cx[i]));
    }
    precise dvec4 d = tdouble(sum);
    if (u_border == BORDER_CONSTANT) {
      d += dvec4(widen_d(u_area - uint(in_x) * uint(in_y)) * widen_d(u_const));
    }
    s_res[me + uint(p)] = finish(d);
  }
  store4(px0, y, s_res[me], s_res[me + 1u], s_res[me + 2u], s_res[me + 3u]);
}

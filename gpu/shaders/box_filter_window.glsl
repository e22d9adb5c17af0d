// window_sum(a, n, e): the sum of WS_LOAD(i, e) over extended indices i in [a, a + n) of an axis
// of WS_N samples, for any window length: reflect-101 windows longer than its period take whole
// periods at once; replicate and constant windows count their outside samples instead of reading
// them. The including shader defines WS_T (sum type), WS_LOAD(i, e) (the sample at extended index
// i, border-mapped) and WS_N.
WS_T window_sum(int a, int n, int e) {
  int len = WS_N;
  WS_T s = WS_T(0);
  if (u_border == BORDER_REFLECT101) {
    if (len == 1) return WS_LOAD(0, e) * WS_T(n);
    int period = 2 * len - 2;
    if (n > period) {
      WS_T whole = WS_T(0);
      for (int i = 0; i < period; ++i) whole += WS_LOAD(i, e);
      int k = n / period;
      s = whole * WS_T(k);
      n -= k * period;
    }
    for (int i = a; i < a + n; ++i) s += WS_LOAD(i, e);
    return s;
  }
  int b = a + n - 1;
  for (int i = max(a, 0); i <= min(b, len - 1); ++i) s += WS_LOAD(i, e);
  int left = clamp(-a, 0, n), right = clamp(b - (len - 1), 0, n);
  if (left > 0) s += WS_LOAD(-1, e) * WS_T(left);
  if (right > 0) s += WS_LOAD(len, e) * WS_T(right);
  return s;
}

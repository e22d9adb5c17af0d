// Strip scan, pass 2: one invocation turns the band's row totals into row offsets (an exclusive
// scan, in place) and writes the band's total. A few thousand values: a sequential loop costs
// less on a CPU renderer than the barriers of a workgroup scan.
layout(local_size_x = 1) in;
layout(std430, binding = 0) buffer Counters { uint counters[]; };  // one per band
layout(std430, binding = 4) buffer RowTotals { uint rows[]; };
uniform uint u_items;  // rows in the band
uniform int u_band;

void main() {
  uint sum = 0u;
  for (uint i = 0u; i < u_items; ++i) {
    uint n = rows[i];
    rows[i] = sum;
    sum += n;
  }
  counters[u_band] = sum;
}

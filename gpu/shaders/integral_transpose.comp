// Tiled transpose of a table of pixels (CHANNELS 8-byte elements each) through shared memory:
// a workgroup reads a TILE x TILE tile row by row (coalesced), and writes it transposed, again
// row by row (coalesced). Each tile row is padded by one element so that reading a tile column
// hits distinct banks (the classic 32 x 33 layout).
layout(local_size_x = TILE, local_size_y = 8) in;
layout(std430, binding = 0) readonly buffer Src { uvec2 src[]; };
layout(std430, binding = 1) writeonly buffer Dst { uvec2 dst[]; };

uniform int u_rows;  // of the source, in pixels
uniform int u_cols;

shared uvec2 tile[CHANNELS][TILE][TILE + 1];

void main() {
  int tx = int(gl_LocalInvocationID.x);
  int ty = int(gl_LocalInvocationID.y);
  int bx = int(gl_WorkGroupID.x) * TILE;
  int by = int(gl_WorkGroupID.y) * TILE;
  for (int j = ty; j < TILE; j += 8) {
    int row = by + j, col = bx + tx;
    if (row < u_rows && col < u_cols) {
      uint i = (uint(row) * uint(u_cols) + uint(col)) * uint(CHANNELS);
      for (int c = 0; c < CHANNELS; ++c) tile[c][j][tx] = src[i + uint(c)];
    }
  }
  memoryBarrierShared();
  barrier();
  // Destination is u_cols x u_rows: dst(col, row) = src(row, col).
  for (int j = ty; j < TILE; j += 8) {
    int drow = bx + j, dcol = by + tx;
    if (drow < u_cols && dcol < u_rows) {
      uint i = (uint(drow) * uint(u_rows) + uint(dcol)) * uint(CHANNELS);
      for (int c = 0; c < CHANNELS; ++c) dst[i + uint(c)] = tile[c][tx][j];
    }
  }
}

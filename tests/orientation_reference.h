// The tests' own reference for EXIF orientation (tag 0x0112 of the EXIF standard, CIPA DC-008):
// each output pixel's source coordinates, written out per orientation from the standard's table
// of which stored corner is shown at the top left. The server walks the stored image with strides
// instead (server/ingest/orientation.cc).
#ifndef GLIMPSE_TESTS_ORIENTATION_REFERENCE_H_
#define GLIMPSE_TESTS_ORIENTATION_REFERENCE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "gpu/image.h"

namespace glimpse::testing {

// `pixels` (`stored`'s layout, rows packed) as orientation `o` (1-8) shows them; `*shown` is set
// to the result's layout (width and height swapped for 5-8).
inline std::vector<uint8_t> TurnedAsExifSays(const std::vector<uint8_t>& pixels,
                                             const gpu::ImageDesc& stored, int o,
                                             gpu::ImageDesc* shown) {
  const int w = stored.width, h = stored.height;
  *shown = stored;
  if (o >= 5) std::swap(shown->width, shown->height);
  const size_t pixel = stored.row_bytes() / size_t(w);
  std::vector<uint8_t> out(pixels.size());
  for (int y = 0; y < shown->height; ++y) {
    for (int x = 0; x < shown->width; ++x) {
      int sx = x, sy = y;  // 1: the top left is stored's top left
      switch (o) {
        case 2:  // top right: mirrored
          sx = w - 1 - x, sy = y;
          break;
        case 3:  // bottom right: turned 180
          sx = w - 1 - x, sy = h - 1 - y;
          break;
        case 4:  // bottom left: flipped
          sx = x, sy = h - 1 - y;
          break;
        case 5:  // left top: transposed
          sx = y, sy = x;
          break;
        case 6:  // right top: turned clockwise
          sx = y, sy = h - 1 - x;
          break;
        case 7:  // right bottom: transversed
          sx = w - 1 - y, sy = h - 1 - x;
          break;
        case 8:  // left bottom: turned anticlockwise
          sx = w - 1 - y, sy = x;
          break;
        default:
          break;
      }
      std::memcpy(&out[(size_t(y) * size_t(shown->width) + size_t(x)) * pixel],
                  &pixels[(size_t(sy) * size_t(w) + size_t(sx)) * pixel], pixel);
    }
  }
  return out;
}

}  // namespace glimpse::testing

#endif  // GLIMPSE_TESTS_ORIENTATION_REFERENCE_H_

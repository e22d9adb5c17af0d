// stb_image_write (Debian's libstb headers) compiled into the including file as static functions,
// its own warnings silenced, and a PNG file of pixels in memory. For the client's output files and
// for tests and benchmarks that need PNG files written by a library other than the server's own
// encoder (server/ingest/encode_png.cc). Include it from one .cc file per program.
//
//   std::string png = StbPngFile(pixels.data(), width, height, /*channels=*/3, width * 3);
#ifndef GLIMPSE_COMMON_STB_WRITE_H_
#define GLIMPSE_COMMON_STB_WRITE_H_

#include <string>

#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

namespace glimpse {

// stb_image_write's callback that appends to the std::string at `context`.
inline void AppendToString(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), size_t(size));
}

// 8-bit pixels, `channels` (1-4) interleaved, rows `stride` bytes apart, as a PNG file; empty if
// stb_image_write refuses them.
inline std::string StbPngFile(const void* pixels, int width, int height, int channels, int stride) {
  std::string out;
  if (!stbi_write_png_to_func(&AppendToString, &out, width, height, channels, pixels, stride)) {
    return {};
  }
  return out;
}

}  // namespace glimpse

#endif  // GLIMPSE_COMMON_STB_WRITE_H_

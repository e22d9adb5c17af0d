// PNG encoding of raw images: the server's EncodePng (server/ingest/encode_png.cc) against
// stb_image_write (the server's encoder before it) and libspng's encoder (zlib, its default
// level), each timed on the same pixels, median of --runs; every file is checked to decode back
// to the pixels. bench/png_encode.py runs it beside cv2.imencode on the same images.
//   png_encode_bench [--runs N] WIDTHxHEIGHTxCHANNELS:uint8|uint16:FILE...
// FILE holds the raw pixels (rows packed, samples little-endian). Prints one JSON object per line:
// {"image": ..., "encoder": ..., "ms": ..., "bytes": ...}.
#include <spng.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "common/stb_write.h"
#include "server/ingest/image_codec.h"

namespace {

using glimpse::gpu::HostImage;
using glimpse::gpu::SampleType;

double MedianMs(int runs, const std::function<void()>& fn) {
  std::vector<double> ms;
  for (int i = 0; i < runs + 1; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const double t =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0) ms.push_back(t);  // one warm-up run
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// libspng's encoder with its defaults (zlib's default level, adaptive filters).
std::string SpngPng(const HostImage& img) {
  std::unique_ptr<spng_ctx, decltype(&spng_ctx_free)> ctx(spng_ctx_new(SPNG_CTX_ENCODER),
                                                          &spng_ctx_free);
  static constexpr uint8_t kColour[4] = {SPNG_COLOR_TYPE_GRAYSCALE, SPNG_COLOR_TYPE_GRAYSCALE_ALPHA,
                                         SPNG_COLOR_TYPE_TRUECOLOR,
                                         SPNG_COLOR_TYPE_TRUECOLOR_ALPHA};
  spng_ihdr ihdr{};
  ihdr.width = uint32_t(img.desc.width);
  ihdr.height = uint32_t(img.desc.height);
  ihdr.bit_depth = uint8_t(img.desc.type == SampleType::kUint16 ? 16 : 8);
  ihdr.color_type = kColour[img.desc.channels - 1];
  spng_set_ihdr(ctx.get(), &ihdr);
  spng_set_option(ctx.get(), SPNG_ENCODE_TO_BUFFER, 1);
  // SPNG_FMT_PNG: samples in host order, as the image holds them.
  if (spng_encode_image(ctx.get(), img.data.data(), img.data.size(), SPNG_FMT_PNG,
                        SPNG_ENCODE_FINALIZE) != 0) {
    return {};
  }
  size_t size = 0;
  int error = 0;
  void* png = spng_get_png_buffer(ctx.get(), &size, &error);
  if (png == nullptr) return {};
  std::string out(static_cast<const char*>(png), size);
  std::free(png);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 9;
  std::vector<std::string> specs;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else {
      specs.emplace_back(argv[i]);
    }
  }
  if (specs.empty()) {
    std::fprintf(stderr, "usage: png_encode_bench [--runs N] WxHxC:uint8|uint16:FILE...\n");
    return 2;
  }
  for (const std::string& spec : specs) {
    int w = 0, h = 0, c = 0;
    char type[8] = {};
    int consumed = 0;
    if (std::sscanf(spec.c_str(), "%dx%dx%d:%7[a-z0-9]:%n", &w, &h, &c, type, &consumed) != 4 ||
        consumed == 0 || (std::strcmp(type, "uint8") != 0 && std::strcmp(type, "uint16") != 0)) {
      std::fprintf(stderr, "bad image spec %s\n", spec.c_str());
      return 2;
    }
    const std::string path = spec.substr(size_t(consumed));
    HostImage img = HostImage::Zeros(
        {w, h, c, std::strcmp(type, "uint16") == 0 ? SampleType::kUint16 : SampleType::kUint8});
    std::ifstream in(path, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                     std::istreambuf_iterator<char>());
    if (bytes.size() != img.data.size()) {
      std::fprintf(stderr, "%s: %zu bytes, %zu expected\n", path.c_str(), bytes.size(),
                   img.data.size());
      return 1;
    }
    img.data = bytes;
    const std::string name = glimpse::gpu::DescribeImage(img.desc);
    struct Encoder {
      const char* name;
      std::function<std::string()> encode;
    };
    std::vector<Encoder> encoders = {
        {"glimpse EncodePng (libdeflate)", [&] { return *glimpse::server::EncodePng(img); }},
        {"libspng (zlib)", [&] { return SpngPng(img); }},
    };
    if (img.desc.type == SampleType::kUint8) {
      encoders.push_back({"stb_image_write", [&] {
                            return glimpse::StbPngFile(img.data.data(), img.desc.width,
                                                       img.desc.height, img.desc.channels,
                                                       int(img.desc.row_bytes()));
                          }});
    }
    for (const Encoder& e : encoders) {
      const std::string png = e.encode();
      absl::StatusOr<HostImage> back = glimpse::server::DecodeEncoded(
          std::span(reinterpret_cast<const uint8_t*>(png.data()), png.size()), 0, uint64_t{1} << 32,
          "png");
      if (!back.ok() || back->data != img.data) {
        std::fprintf(stderr, "%s: %s's file does not decode back to the pixels\n", name.c_str(),
                     e.name);
        return 1;
      }
      const double ms = MedianMs(runs, [&] { (void)e.encode(); });
      std::printf("{\"image\": \"%s\", \"encoder\": \"%s\", \"ms\": %.3f, \"bytes\": %zu}\n",
                  name.c_str(), e.name, ms, png.size());
      std::fflush(stdout);
    }
  }
  return 0;
}

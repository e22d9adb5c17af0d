// Decoding encoded files as the server does (DecodeEncoded: probe, the pixel-limit check, the
// allocation, the decode), against the decoder library alone into memory allocated once: for
// JPEG, libjpeg-turbo's tjDecompress2 to RGB (the floor for the same pixels). Median of --runs.
// Colour images are also decoded to four channels (opaque alpha added), as GPUs take them.
//   decode_bench [--runs N] FILE...
// --reorient WxH[,WxH]: instead, the copy that turns a decoded image as its EXIF orientation tag
// says (server/ingest/orientation.cc, Reorient) for 1-, 3- and 4-byte pixels (grey; RGB as CPU
// renderers take it; RGBA, or RGB widened for a GPU) and orientations 3 (turned 180), 6 (a
// quarter turn clockwise, a portrait photo from a phone) and 8, against a memcpy of the same
// bytes (the floor) in the same run; memory allocated once and written before the runs.
//   decode_bench --reorient 1920x1080,3840x2160 [--runs N]
#include <turbojpeg.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "server/ingest/decoders.h"
#include "server/ingest/image_codec.h"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

template <typename Fn>
double TimeMs(int runs, Fn fn) {
  std::vector<double> ms;
  for (int i = 0; i < runs + 2; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const double t =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i >= 2) ms.push_back(t);  // two warm-up runs
  }
  return Median(ms);
}

int ReorientTable(const std::string& sizes, int runs) {
  std::printf(
      "| size | pixel bytes | orientation | Reorient ms | memcpy ms | Reorient / memcpy |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  size_t at = 0;
  while (at < sizes.size()) {
    size_t end = sizes.find(',', at);
    if (end == std::string::npos) end = sizes.size();
    int w = 0, h = 0;
    if (std::sscanf(sizes.substr(at, end - at).c_str(), "%dx%d", &w, &h) != 2 || w < 1 || h < 1) {
      std::fprintf(stderr, "--reorient: sizes are WxH[,WxH], got %s\n", sizes.c_str());
      return 2;
    }
    at = end + 1;
    for (const size_t pixel : {size_t{1}, size_t{3}, size_t{4}}) {
      const size_t row = size_t(w) * pixel, bytes = row * size_t(h);
      std::vector<uint8_t> src(bytes), dst(bytes);
      for (size_t i = 0; i < bytes; ++i) src[i] = uint8_t(i * 2654435761u >> 13);
      std::memcpy(dst.data(), src.data(), bytes);
      const double copy = TimeMs(runs, [&] { std::memcpy(dst.data(), src.data(), bytes); });
      for (const int o : {3, 6, 8}) {
        const size_t out_row = o >= 5 ? size_t(h) * pixel : row;
        const double turn = TimeMs(runs, [&] {
          glimpse::server::ingest::Reorient(o, src.data(), w, h, pixel, row, dst.data(), out_row);
        });
        std::printf("| %dx%d | %zu | %d | %.3f | %.3f | %.2fx |\n", w, h, pixel, o, turn, copy,
                    turn / copy);
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 21;
  std::vector<std::string> files;
  std::string reorient;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--reorient") == 0 && i + 1 < argc) {
      reorient = argv[++i];
    } else {
      files.emplace_back(argv[i]);
    }
  }
  if (!reorient.empty()) return ReorientTable(reorient, runs);
  if (files.empty()) {
    std::fprintf(stderr,
                 "usage: decode_bench [--runs N] FILE...\n"
                 "       decode_bench --reorient WxH[,WxH] [--runs N]\n");
    return 2;
  }
  std::printf(
      "| file | bytes | decoded | DecodeEncoded ms | library alone ms | ratio | as 4 channels "
      "ms |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const std::string& path : files) {
    std::ifstream in(path, std::ios::binary);
    const std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)),
                                    std::istreambuf_iterator<char>());
    absl::StatusOr<glimpse::gpu::HostImage> probe =
        glimpse::server::DecodeEncoded(file, 0, uint64_t{1} << 32, "file");
    if (!probe.ok()) {
      std::fprintf(stderr, "%s: %s\n", path.c_str(), std::string(probe.status().message()).c_str());
      return 1;
    }
    const double server = TimeMs(
        runs, [&] { (void)glimpse::server::DecodeEncoded(file, 0, uint64_t{1} << 32, "file"); });
    const double four = probe->desc.channels != 3 ? 0 : TimeMs(runs, [&] {
      (void)glimpse::server::DecodeEncoded(file, 4, uint64_t{1} << 32, "file");
    });
    double alone = 0;
    const bool jpeg = file.size() > 2 && file[0] == 0xFF && file[1] == 0xD8;
    if (jpeg) {
      tjhandle tj = tjInitDecompress();
      std::vector<uint8_t> out(probe->data.size());
      const int pf = probe->desc.channels == 1 ? TJPF_GRAY : TJPF_RGB;
      alone = TimeMs(runs, [&] {
        tjDecompress2(tj, file.data(), file.size(), out.data(), probe->desc.width, 0,
                      probe->desc.height, pf, 0);
      });
      tjDestroy(tj);
    }
    std::printf("| %s | %zu | %s | %.2f | %s | %s | %s |\n", path.c_str(), file.size(),
                glimpse::gpu::DescribeImage(probe->desc).c_str(), server,
                jpeg ? std::to_string(alone).substr(0, 5).c_str() : "-",
                jpeg ? std::to_string(server / alone).substr(0, 4).c_str() : "-",
                four > 0 ? std::to_string(four).substr(0, 5).c_str() : "-");
  }
  return 0;
}

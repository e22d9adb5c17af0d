// Upload of host pixels to the device against the physical floor measured in the same run: a
// memcpy of the same bytes (on CPU renderers "device" memory is host memory, so one copy is the
// least an upload can cost). For each size and channel count: gpu::Image::Upload whole (what a
// call pays), and, for reading the numbers, its parts: the plain texture alone and the packed form
// alone; the same from staging memory, and a decoder's write plus the upload, into fresh host
// memory against into staging memory. Then the way back: the same bytes written into a device
// buffer by the GPU (a buffer copy) and read back in 1 MiB pieces as the kernels read their results
// (gpu/readback.h), by each path: through a mapping, copied out by the driver, and copied by the
// device into pinned host memory, each against the same memcpy.
//   upload_bench [--runs N] [--warmup N] [--sizes 1920x1080,3840x2160] [--channels 1,3,4]
//                [--json FILE] [--device auto|software|N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/str.h"

namespace glimpse::bench {
namespace {

double Ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int Main(int argc, char** argv) {
  BenchArgs args;
  args.runs = 15;
  args.warmup = 3;
  args.sizes = {{1920, 1080}, {3840, 2160}};
  std::vector<int> channels = {1, 3, 4};
  ParseBenchArgs(argc, argv, &args, [&](const std::string& flag, const std::string& value) {
    if (flag != "--channels") return false;
    channels = ParseInts(value);
    return true;
  });
  // Staging memory for the largest image asked of it (an 8K RGBA one is 127 MiB).
  std::unique_ptr<gpu::Context> ctx = OpenContextOrExit(args, size_t{256} << 20);
  std::mt19937 rng(1);
  std::vector<Row> rows;
  for (const auto& [w, h] : args.sizes) {
    for (int c : channels) {
      const gpu::ImageDesc desc{w, h, c, gpu::SampleType::kUint8};
      gpu::HostImage host = gpu::HostImage::Zeros(desc);
      for (uint8_t& b : host.data) b = uint8_t(rng());
      std::vector<uint8_t> target(host.data.size());
      const std::string size = StrCat(w, "x", h);
      const std::string params = StrCat(c, " channels, ", desc.bytes() >> 10, " KiB");
      auto row = [&](const std::string& what, const Timing& t) {
        const double gbs = t.median_ms > 0 ? 2.0 * double(desc.bytes()) / t.median_ms / 1e6 : 0;
        rows.push_back({"upload", what, size, params, t.median_ms, gbs, 0, t.runs});
      };
      const Timing copy = Measure(
          [&] {
            const auto t0 = std::chrono::steady_clock::now();
            std::memcpy(target.data(), host.data.data(), host.data.size());
            return Ms(t0);
          },
          args.warmup, args.runs);
      row("memcpy (floor)", copy);
      row("Image::Upload", Measure(
                               [&] {
                                 const auto t0 = std::chrono::steady_clock::now();
                                 gpu::Image image = UploadOrExit(*ctx, host);
                                 glFinish();
                                 const double ms = Ms(t0);
                                 return ms;
                               },
                               args.warmup, args.runs));
      // From staging memory (gpu/staging.h): the rows written beforehand in the upload's layout,
      // then the upload alone (what a call's upload_ns counts), and then what a decoder's output
      // costs on its way in: written into fresh host memory (a new allocation per image, as
      // without staging) and uploaded, against written into staging memory and uploaded. The
      // write is a memcpy of the image's rows, standing for the decoder's.
      const gpu::StagedRows layout = gpu::StagedRowsFor(ctx->limits(), desc);
      {
        gpu::StagingBlock block = ctx->staging()->Reserve(layout.bytes(desc));
        if (!block) {
          std::fprintf(stderr, "no staging block of %zu bytes\n", layout.bytes(desc));
          std::exit(1);
        }
        gpu::StageRows(layout, desc, host.data, block.bytes());
        row("Image::Upload from staging", Measure(
                                              [&] {
                                                const auto t0 = std::chrono::steady_clock::now();
                                                absl::StatusOr<gpu::Image> image =
                                                    gpu::Image::Upload(*ctx, desc, block);
                                                glFinish();
                                                const double ms = Ms(t0);
                                                if (!image.ok()) std::exit(1);
                                                return ms;
                                              },
                                              args.warmup, args.runs));
      }
      ctx->staging()->Reclaim();
      row("write + upload: fresh memory",
          Measure(
              [&] {
                const auto t0 = std::chrono::steady_clock::now();
                std::vector<uint8_t> fresh(host.data.size());
                std::memcpy(fresh.data(), host.data.data(), fresh.size());
                gpu::Image image = UploadOrExit(*ctx, {desc, std::move(fresh)});
                glFinish();
                return Ms(t0);
              },
              args.warmup, args.runs));
      row("write + upload: staging",
          Measure(
              [&] {
                const auto t0 = std::chrono::steady_clock::now();
                gpu::StagingBlock block = ctx->staging()->Reserve(layout.bytes(desc));
                if (!block) std::exit(1);
                gpu::StageRows(layout, desc, host.data, block.bytes());
                absl::StatusOr<gpu::Image> image = gpu::Image::Upload(*ctx, desc, block);
                glFinish();
                block = gpu::StagingBlock();
                ctx->staging()->Reclaim();
                const double ms = Ms(t0);
                if (!image.ok()) std::exit(1);
                return ms;
              },
              args.warmup, args.runs));
      // The parts, for reading the numbers: the copy into a texture allocated once, of the
      // plain format and of the packed (RGBA32UI) form. (Image::Upload takes its textures from
      // the context's pool of freed ones: gpu/texture_pool.h.)
      absl::StatusOr<gpu::Image> plain = gpu::Image::Allocate(*ctx, desc);
      const GLenum formats[] = {GL_RED_INTEGER, GL_RG_INTEGER, GL_RGB_INTEGER, GL_RGBA_INTEGER};
      row("copy into plain texture", Measure(
                                         [&] {
                                           const auto t0 = std::chrono::steady_clock::now();
                                           glBindTexture(GL_TEXTURE_2D, plain->texture());
                                           glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, desc.width,
                                                           desc.height, formats[c - 1],
                                                           GL_UNSIGNED_BYTE, host.data.data());
                                           glFinish();
                                           return Ms(t0);
                                         },
                                         args.warmup, args.runs));
      if (desc.row_bytes() % 16 == 0) {
        gpu::GlTexture packed = gpu::NewRgba32uiTexture(*ctx, gpu::PackedTexelsPerRow(desc), h);
        row("copy into packed texture",
            Measure(
                [&] {
                  const auto t0 = std::chrono::steady_clock::now();
                  glBindTexture(GL_TEXTURE_2D, packed.get());
                  glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, gpu::PackedTexelsPerRow(desc),
                                  desc.height, GL_RGBA_INTEGER, GL_UNSIGNED_INT, host.data.data());
                  glFinish();
                  return Ms(t0);
                },
                args.warmup, args.runs));
      }
      glBindTexture(GL_TEXTURE_2D, 0);
      // Read-backs: a buffer the GPU has just written (copied from another), read in pieces.
      const gpu::Buffer source = gpu::Buffer::Create(host.data.size(), host.data.data());
      const gpu::Buffer written = gpu::Buffer::Create(host.data.size());
      for (gpu::ReadPath path :
           {gpu::ReadPath::kMapped, gpu::ReadPath::kCopied, gpu::ReadPath::kPinned}) {
        gpu::Readback readback(path);  // kept across runs, as the context keeps its own
        const std::string name = StrCat("read back: ", gpu::ReadPathName(path));
        std::fill(target.begin(), target.end(), uint8_t{0});
        row(name.c_str(), Measure(
                              [&] {
                                glBindBuffer(GL_COPY_READ_BUFFER, source.get());
                                glBindBuffer(GL_COPY_WRITE_BUFFER, written.get());
                                glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, 0, 0,
                                                    GLsizeiptr(host.data.size()));
                                glBindBuffer(GL_COPY_READ_BUFFER, 0);
                                glBindBuffer(GL_COPY_WRITE_BUFFER, 0);
                                glFinish();
                                const auto t0 = std::chrono::steady_clock::now();
                                const bool read =
                                    readback.Read(written, host.data.size(), size_t{1} << 20,
                                                  [&](const uint8_t* bytes, size_t at, size_t n) {
                                                    std::memcpy(target.data() + at, bytes, n);
                                                    return true;
                                                  });
                                const double ms = Ms(t0);
                                if (!read || target != host.data) {
                                  std::fprintf(stderr, "%s: wrong bytes\n", name.c_str());
                                  std::exit(1);
                                }
                                return ms;
                              },
                              args.warmup, args.runs));
      }
    }
  }
  Report(*ctx, 0, rows, args.json, argc, argv);
  return 0;
}

}  // namespace
}  // namespace glimpse::bench

int main(int argc, char** argv) { return glimpse::bench::Main(argc, argv); }

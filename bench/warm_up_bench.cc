// Times a server's start-up steps on the device, without the server (it builds where gRPC does
// not, as on a bare GPU machine): each kernel's Prepare() over every sample type (building the
// programs: where a GPU driver compiles) and WarmUp() (a dispatch of every program `auto` can
// pick, on tiny images: where llvmpipe compiles), in the server's order; then, per analysis, the
// first `auto` call on a large image of each channel count (its upload finished before: "upload"
// rows) against the median of the warm calls that follow (GPU time; wall time, "+read", with the
// read-back). The first call is the one the warm-up exists for: within 1.5x of a warm call, it paid
// no compile. Its wall time also holds what a first call at a size larger than any before pays,
// compiled or not: the kernels keep their work buffers between calls and grow them when too small,
// and a fresh buffer costs a page fault per 4 KiB on llvmpipe (the 4-channel integral table's band
// at 3200x2400, 134 MB: about 50 ms).
//   warm_up_bench [--sizes 3200x2400] [--runs N] [--json FILE] [--device auto|software|N]
//                 [--batch 1] [--warm-up 1]
// --batch 0: builds the programs one at a time instead of in one gpu::ProgramBatch, as the server
// does (where the driver compiles on threads of its own, the batch lets it compile side by side);
// --warm-up 0: stops after building them.
// A new machine's start: the driver's disk cache off (Mesa: MESA_SHADER_CACHE_DISABLE=true;
// NVIDIA: __GL_SHADER_DISK_CACHE=0). A restart: twice on one cache directory
// (MESA_SHADER_CACHE_DIR / __GL_SHADER_DISK_CACHE_PATH), the second run reading what the first
// wrote.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/str.h"
#include "gpu/box_filter.h"
#include "gpu/compaction.h"
#include "gpu/histogram.h"
#include "gpu/integral_image.h"

namespace glimpse::bench {
namespace {

constexpr gpu::SampleType kTypes[] = {gpu::SampleType::kUint8, gpu::SampleType::kUint16,
                                      gpu::SampleType::kFloat32};

// One analysis: how the server prepares and warms it up, and one `auto` call on an image, which
// keeps its output for `digest` (equal for the first and the warm calls, or the benchmark stops).
struct Call {
  uint64_t gpu_ns = 0;
  std::string variant;
};
struct Analysis {
  const char* name;
  std::function<absl::Status(gpu::SampleType)> prepare;
  std::function<absl::Status()> warm_up;
  std::string params;  // of the call
  std::function<absl::StatusOr<Call>(const gpu::Image&)> call;
  std::function<uint64_t()> digest;  // of the last call's output
};

// FNV-1a over 64-bit words (and the tail's bytes): a cheap fingerprint of an output.
uint64_t Digest(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 1469598103934665603ull ^ size;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < size; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

int Main(int argc, char** argv) {
  BenchArgs args;
  args.sizes = {{3200, 2400}};
  bool batch = true, warm_up = true;
  ParseBenchArgs(argc, argv, &args, [&](const std::string& flag, const std::string& value) {
    if (flag == "--batch") {
      batch = value != "0";
    } else if (flag == "--warm-up") {
      warm_up = value != "0";
    } else {
      return false;
    }
    return true;
  });
  std::unique_ptr<gpu::Context> ctx = OpenContextOrExit(args);
  gpu::Context& c = *ctx;
  gpu::HistogramKernel histogram(c);
  gpu::IntegralImageKernel integral(c);
  gpu::CompactionKernel compaction(c);
  gpu::BoxFilterKernel box(c);
  gpu::HistogramResult histogram_out;
  std::vector<uint8_t> integral_out;  // the consumer's copy of the table, as the server streams it
  gpu::CompactionResult compaction_out;
  std::vector<uint8_t> box_out;  // the filtered image, as the server streams it

  // The server's order: prepared histogram first, warmed up box filter first.
  std::vector<Analysis> analyses = {
      {"histogram", [&](gpu::SampleType t) { return histogram.Prepare(t); },
       [&] { return histogram.WarmUp(); }, "256 bins per channel",
       [&](const gpu::Image& image) -> absl::StatusOr<Call> {
         auto r = histogram.Run(image, gpu::HistogramOptions{});
         if (!r.ok()) return r.status();
         histogram_out = *std::move(r);
         return Call{histogram_out.gpu_ns,
                     std::string(gpu::HistogramVariantName(histogram_out.variant))};
       },
       [&] {
         uint64_t h = 0;
         for (const auto& counts : histogram_out.counts) {
           h = h * 31 + Digest(counts.data(), counts.size() * sizeof(uint64_t));
         }
         return h;
       }},
      {"integral", [&](gpu::SampleType t) { return integral.Prepare(t); },
       [&] { return integral.WarmUp(); }, "8-byte sums",
       [&](const gpu::Image& image) -> absl::StatusOr<Call> {
         const size_t row = size_t(image.desc().width) * size_t(image.desc().channels) * 8;
         integral_out.resize(row * size_t(image.desc().height));
         auto r = integral.Run(image, gpu::IntegralImageOptions{}, [&](const gpu::IntegralBand& b) {
           std::memcpy(integral_out.data() + size_t(b.y0) * row, b.bytes().data(),
                       b.bytes().size());
           return absl::OkStatus();
         });
         if (!r.ok()) return r.status();
         return Call{r->gpu_ns, std::string(gpu::IntegralImageVariantName(r->variant))};
       },
       [&] { return Digest(integral_out.data(), integral_out.size()); }},
      {"compaction", [&](gpu::SampleType t) { return compaction.Prepare(t); },
       [&] { return compaction.WarmUp(); }, "channel 0 in [0, 25], listed",
       [&](const gpu::Image& image) -> absl::StatusOr<Call> {
         auto r = compaction.Run(image, gpu::CompactionOptions{.lo = 0, .hi = 25});
         if (!r.ok()) return r.status();
         compaction_out = *std::move(r);
         return Call{compaction_out.gpu_ns,
                     std::string(gpu::CompactionVariantName(compaction_out.variant))};
       },
       [&] {
         return Digest(compaction_out.xy.data(), compaction_out.xy.size() * sizeof(uint32_t)) ^
                Digest(compaction_out.values.data(), compaction_out.values.size()) ^
                compaction_out.total;
       }},
      {"box_filter", [&](gpu::SampleType t) { return box.Prepare(t); },
       [&] { return box.WarmUp(); }, "r=7",
       [&](const gpu::Image& image) -> absl::StatusOr<Call> {
         const size_t row = image.desc().row_bytes();
         auto r = box.Stream(
             image, gpu::BoxFilterOptions{.rx = 7, .ry = 7}, [&](const gpu::BoxFilterRows& b) {
               std::memcpy(box_out.data() + size_t(b.y0) * row, b.bytes.data(), b.bytes.size());
               return absl::OkStatus();
             });
         if (!r.ok()) return r.status();
         return Call{r->gpu_ns, std::string(gpu::BoxFilterVariantName(r->variant))};
       },
       [&] { return Digest(box_out.data(), box_out.size()); }},
  };

  std::vector<Row> rows;
  auto step = [&](const char* kernel, const char* what, const std::function<absl::Status()>& fn) {
    const size_t before = c.programs_built();
    absl::Status s;
    const double ms = WallMs([&] { s = fn(); });
    if (!s.ok()) {
      std::fprintf(stderr, "%s %s: %s\n", kernel, what, std::string(s.message()).c_str());
      std::exit(1);
    }
    const size_t built = c.programs_built() - before;
    rows.push_back({kernel, what, "-", StrCat(built, " programs built"), ms, 0, 0, 1});
    std::fprintf(stderr, "%s %s: %.0f ms, %zu programs built\n", kernel, what, ms, built);
  };
  const double prepare_ms = WallMs([&] {
    std::optional<gpu::ProgramBatch> programs;
    if (batch) programs.emplace(c);
    for (gpu::SampleType t : kTypes) {
      for (const Analysis& a : analyses) {
        step(a.name, StrCat("prepare ", gpu::SampleTypeName(t)).c_str(),
             [&] { return a.prepare(t); });
      }
    }
    if (programs) step("all", "prepare: batch finished", [&] { return programs->Finish(); });
  });
  rows.push_back({"start-up", batch ? "prepare (one batch)" : "prepare (no batch)", "-",
                  StrCat(c.programs_built(), " programs built"), prepare_ms, 0, 0, 1});
  std::fprintf(stderr, "prepare%s: %.0f ms, %zu programs built\n", batch ? " (one batch)" : "",
               prepare_ms, c.programs_built());
  if (!warm_up) {
    Report(c, 0, rows, args.json, argc, argv);
    return 0;
  }
  const double warm_up_ms = WallMs([&] {
    for (auto it = analyses.rbegin(); it != analyses.rend(); ++it) {
      step(it->name, "warm_up", it->warm_up);
    }
  });
  const double start_ms = prepare_ms + warm_up_ms;
  rows.push_back({"start-up", "prepare+warm_up", "-", StrCat(c.programs_built(), " programs built"),
                  start_ms, 0, 0, 1});
  std::fprintf(stderr, "start-up: %.0f ms, %zu programs built\n", start_ms, c.programs_built());

  std::mt19937_64 rng(42);
  for (auto [w, h] : args.sizes) {
    const std::string size = StrCat(w, "x", h);
    for (int ch : {4, 1}) {
      gpu::HostImage host = gpu::HostImage::Zeros({w, h, ch, gpu::SampleType::kUint8});
      for (auto& b : host.data) b = uint8_t(rng());
      // The upload is finished before the first call: on a GPU its copy runs after glTexSubImage2D
      // returns, and a first dispatch right behind it would count the copy's time as its own (in
      // GL timer queries too: the dispatch waits for the texture).
      std::optional<gpu::Image> uploaded;
      const double upload_wall = WallMs([&] {
        uploaded.emplace(UploadOrExit(c, host));
        c.Finish();
      });
      const gpu::Image& image = *uploaded;
      rows.push_back(
          {"upload", "Image::Upload+finish", size, StrCat(ch, "ch uint8"), upload_wall, 0, 0, 1});
      std::fprintf(stderr, "%s %dch: upload and glFinish %.2f ms\n", size.c_str(), ch, upload_wall);
      // The consumer's copies of the outputs, allocated and touched before the calls: their page
      // faults are the reader's, not the first call's.
      integral_out.assign(size_t(host.desc.pixels()) * size_t(ch) * 8, 1);
      box_out.assign(host.desc.bytes(), 1);
      for (const Analysis& a : analyses) {
        const std::string params = StrCat(ch, "ch uint8 ", a.params);
        absl::StatusOr<Call> first;
        const double first_wall = WallMs([&] { first = a.call(image); });
        if (!first.ok()) {
          std::fprintf(stderr, "%s: %s\n", a.name, std::string(first.status().message()).c_str());
          return 1;
        }
        const uint64_t first_digest = a.digest();
        std::vector<double> walls;
        Timing t = Measure(
            [&] {
              absl::StatusOr<Call> r;
              walls.push_back(WallMs([&] { r = a.call(image); }));
              if (!r.ok() || a.digest() != first_digest) {
                std::fprintf(stderr, "%s: a warm call disagrees with the first\n", a.name);
                std::exit(1);
              }
              return double(r->gpu_ns) / 1e6;
            },
            0, args.RunsFor(w, h));
        const double warm_wall = Summarize(walls).median_ms;
        // A single first call against the warm calls' spread, not only their median: on a busy
        // machine one warm call in a few is as slow as a first call that paid for something.
        const double slowest_warm = *std::max_element(walls.begin(), walls.end());
        const std::string name = StrCat("auto=", first->variant);
        const double first_gpu = double(first->gpu_ns) / 1e6;
        rows.push_back({a.name, StrCat("first:", name), size, params, first_gpu, 0, 0, 1});
        rows.push_back({a.name, name, size, params, t.median_ms, 0, 0, t.runs});
        rows.push_back(
            {a.name, StrCat("first:", name, "+read"), size, params, first_wall, 0, 0, 1});
        rows.push_back({a.name, StrCat(name, "+read"), size, params, warm_wall, 0, 0, t.runs});
        std::fprintf(stderr,
                     "%s %s %s: first/warm gpu %.2f / %.2f ms (%.2fx), wall %.2f / %.2f ms "
                     "(%.2fx; slowest warm call %.2f ms)\n",
                     size.c_str(), a.name, params.c_str(), first_gpu, t.median_ms,
                     first_gpu / t.median_ms, first_wall, warm_wall, first_wall / warm_wall,
                     slowest_warm);
      }
    }
  }
  Report(c, 0, rows, args.json, argc, argv);
  return 0;
}

}  // namespace
}  // namespace glimpse::bench

int main(int argc, char** argv) { return glimpse::bench::Main(argc, argv); }

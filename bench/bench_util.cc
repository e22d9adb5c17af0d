#include "bench/bench_util.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "gpu/gl_handles.h"

namespace glimpse::bench {

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  for (size_t p = 0; p < s.size();) {
    size_t comma = s.find(',', p);
    out.push_back(s.substr(p, comma - p));
    p = comma == std::string::npos ? s.size() : comma + 1;
  }
  return out;
}

std::vector<int> ParseInts(const std::string& s) {
  std::vector<int> out;
  for (const std::string& one : SplitCommas(s)) out.push_back(std::atoi(one.c_str()));
  return out;
}

void ParseBenchArgs(int argc, char** argv, BenchArgs* args,
                    const std::function<bool(const std::string&, const std::string&)>& extra) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value (or is unknown)\n", flag.c_str());
      std::exit(2);
    }
    const std::string value = argv[++i];
    if (flag == "--runs") {
      args->runs = std::atoi(value.c_str());
    } else if (flag == "--large-runs") {
      args->large_runs = std::atoi(value.c_str());
    } else if (flag == "--warmup") {
      args->warmup = std::atoi(value.c_str());
    } else if (flag == "--json") {
      args->json = value;
    } else if (flag == "--device") {
      args->device = value;
    } else if (flag == "--sizes") {
      args->sizes.clear();
      for (const std::string& one : SplitCommas(value)) {
        int w = 0, h = 0;
        if (std::sscanf(one.c_str(), "%dx%d", &w, &h) != 2 || w < 1 || h < 1) {
          std::fprintf(stderr, "--sizes wants WxH[,WxH...], got %s\n", one.c_str());
          std::exit(2);
        }
        args->sizes.emplace_back(w, h);
      }
    } else if (!extra || !extra(flag, value)) {
      std::fprintf(stderr, "unknown argument %s\n", flag.c_str());
      std::exit(2);
    }
  }
  if (args->runs < 1 || args->large_runs < 1 || args->warmup < 0) {
    std::fprintf(stderr, "--runs and --large-runs must be at least 1, --warmup at least 0\n");
    std::exit(2);
  }
}

std::unique_ptr<gpu::Context> OpenContextOrExit(const BenchArgs& args, size_t staging_bytes) {
  auto ctx = gpu::Context::Create(
      {.device = args.device, .debug_output = false, .staging_bytes = staging_bytes});
  if (!ctx.ok()) {
    std::fprintf(stderr, "no GL context: %s\n", std::string(ctx.status().message()).c_str());
    std::exit(1);
  }
  if (staging_bytes > 0 && (*ctx)->staging() == nullptr) {
    std::fprintf(stderr, "no staging memory of %zu bytes on this device\n", staging_bytes);
    std::exit(1);
  }
  return std::move(*ctx);
}

gpu::Image UploadOrExit(gpu::Context& ctx, const gpu::HostImage& host) {
  absl::StatusOr<gpu::Image> image = gpu::Image::Upload(ctx, host);
  if (!image.ok()) {
    std::fprintf(stderr, "uploading a %s image: %s\n", gpu::DescribeImage(host.desc).c_str(),
                 std::string(image.status().message()).c_str());
    std::exit(1);
  }
  return std::move(*image);
}

Timing Summarize(std::vector<double> t) {
  Timing r;
  r.runs = int(t.size());
  if (t.empty()) return r;
  std::sort(t.begin(), t.end());
  r.min_ms = t.front();
  r.median_ms = t.size() % 2 ? t[t.size() / 2] : (t[t.size() / 2 - 1] + t[t.size() / 2]) / 2;
  return r;
}

Timing Measure(const std::function<double()>& fn, int warmup, int runs) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  t.reserve(size_t(runs));
  for (int i = 0; i < runs; ++i) t.push_back(fn());
  return Summarize(std::move(t));
}

double WallMs(const std::function<void()>& fn) {
  auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double CopyBandwidthGBs(gpu::Context& ctx, size_t bytes) {
  bytes = std::min<size_t>(bytes, size_t(ctx.limits().max_storage_block_bytes));
  gpu::Buffer src = gpu::Buffer::Create(bytes);
  gpu::Buffer dst = gpu::Buffer::Create(bytes);
  src.Zero();
  Timing t = Measure(
      [&] {
        gpu::GpuTimer timer;
        glBindBuffer(GL_COPY_READ_BUFFER, src.get());
        glBindBuffer(GL_COPY_WRITE_BUFFER, dst.get());
        glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, 0, 0, GLsizeiptr(bytes));
        return double(timer.StopAndRead()) / 1e6;
      },
      2, 9);
  return 2.0 * double(bytes) / (t.median_ms * 1e6);
}

namespace {
std::string JsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    o += c;
  }
  return o;
}
}  // namespace

void Report(const gpu::Context& ctx, double copy_gbs, const std::vector<Row>& rows,
            const std::string& json_path, int argc, char** argv) {
  const gpu::DeviceInfo& info = ctx.info();
  std::string command;
  for (int i = 0; i < argc; ++i) {
    // Appended in two steps: GCC 12 at -O3 flags `const char* + std::string` with a false
    // -Wrestrict, which -Werror turns into a build failure.
    if (i > 0) command += ' ';
    command += argv[i];
  }
  std::printf("device: %s | %s | %s\n", info.vendor.c_str(), info.renderer.c_str(),
              info.version.c_str());
  const std::string subgroups = gpu::DescribeSubgroups(info.limits);
  std::printf("subgroups: %s\n", subgroups.c_str());
  if (copy_gbs > 0) {
    std::printf("copy bandwidth (glCopyBufferSubData, read+write): %.2f GB/s\n", copy_gbs);
  }
  std::printf("command: %s\n\n", command.c_str());
  std::printf("| %-10s | %-18s | %-10s | %-22s | %10s | %9s | %8s |\n", "kernel", "variant", "size",
              "params", "median ms", "GB/s", "of copy");
  std::printf("|%s|%s|%s|%s|%s|%s|%s|\n", std::string(12, '-').c_str(),
              std::string(20, '-').c_str(), std::string(12, '-').c_str(),
              std::string(24, '-').c_str(), std::string(12, '-').c_str(),
              std::string(11, '-').c_str(), std::string(10, '-').c_str());
  for (const Row& r : rows) {
    char gbs[32] = "-", ratio[32] = "-";
    if (r.gbs > 0) std::snprintf(gbs, sizeof gbs, "%.2f", r.gbs);
    if (r.copy_ratio > 0) std::snprintf(ratio, sizeof ratio, "%.1f%%", 100 * r.copy_ratio);
    std::printf("| %-10s | %-18s | %-10s | %-22s | %10.3f | %9s | %8s |\n", r.kernel.c_str(),
                r.variant.c_str(), r.size.c_str(), r.params.c_str(), r.ms, gbs, ratio);
  }
  std::fflush(stdout);
  if (json_path.empty()) return;
  std::ofstream out(json_path);
  out << "{\n  \"vendor\": \"" << JsonEscape(info.vendor) << "\",\n  \"renderer\": \""
      << JsonEscape(info.renderer) << "\",\n  \"gl_version\": \"" << JsonEscape(info.version)
      << "\",\n  \"subgroups\": \"" << JsonEscape(subgroups) << "\",\n  \"command\": \""
      << JsonEscape(command) << "\",\n  \"copy_gbs\": " << copy_gbs << ",\n  \"rows\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    out << "    {\"kernel\": \"" << JsonEscape(r.kernel) << "\", \"variant\": \""
        << JsonEscape(r.variant) << "\", \"size\": \"" << r.size << "\", \"params\": \""
        << JsonEscape(r.params) << "\", \"median_ms\": " << r.ms << ", \"gbs\": " << r.gbs
        << ", \"copy_ratio\": " << r.copy_ratio << ", \"runs\": " << r.runs << "}"
        << (i + 1 < rows.size() ? ",\n" : "\n");
  }
  out << "  ]\n}\n";
}

}  // namespace glimpse::bench

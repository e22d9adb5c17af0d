#include "bench/bench_util.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "gpu/gl_handles.h"

namespace glimpse::bench {

Timing Measure(const std::function<double()>& fn, int warmup, int runs) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  t.reserve(size_t(runs));
  for (int i = 0; i < runs; ++i) t.push_back(fn());
  std::sort(t.begin(), t.end());
  Timing r;
  r.runs = runs;
  r.min_ms = t.front();
  r.median_ms = t.size() % 2 ? t[t.size() / 2] : (t[t.size() / 2 - 1] + t[t.size() / 2]) / 2;
  return r;
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
  std::printf("copy bandwidth (glCopyBufferSubData, read+write): %.2f GB/s\n", copy_gbs);
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
      << "\",\n  \"command\": \"" << JsonEscape(command) << "\",\n  \"copy_gbs\": " << copy_gbs
      << ",\n  \"rows\": [\n";
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

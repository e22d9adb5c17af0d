#include "client/output_files.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "common/stb_write.h"

namespace glimpse::client {

std::string FormatName(v1::SampleFormat f) {
  switch (f) {
    case v1::SAMPLE_FORMAT_UINT8:
      return "uint8";
    case v1::SAMPLE_FORMAT_UINT16:
      return "uint16";
    case v1::SAMPLE_FORMAT_FLOAT32:
      return "float32";
    default:
      return "unknown format";
  }
}

namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// "-" and /dev/stdout write to the already open standard output: a process whose user does not
// own the pipe on fd 1 (a container's non-root user) may not reopen it by path.
File Open(const std::string& path) {
  if (path == "-" || path == "/dev/stdout") {
    std::fflush(stdout);
    return File(fdopen(dup(STDOUT_FILENO), "wb"));
  }
  return File(std::fopen(path.c_str(), "wb"));
}
std::string CannotWrite(const std::string& path) {
  return fmt::format("cannot write {}: {}", path, std::strerror(errno));
}

double BinEdge(const v1::HistogramResponse& h, uint32_t b) {
  return h.lo() + (h.hi() - h.lo()) * double(b) / double(h.bins());
}

}  // namespace

std::string WriteHistogramCsv(const std::string& path, const v1::HistogramResponse& h) {
  File f = Open(path);
  if (!f) return CannotWrite(path);
  std::string out = "bin,lo,hi";
  for (int i = 0; i < h.histograms_size(); ++i) out += fmt::format(",count{}", i);
  out += "\n";
  for (uint32_t b = 0; b < h.bins(); ++b) {
    out += fmt::format("{},{},{}", b, BinEdge(h, b), BinEdge(h, b + 1));
    for (const auto& c : h.histograms()) out += fmt::format(",{}", c.counts(int(b)));
    out += "\n";
  }
  if (std::fwrite(out.data(), 1, out.size(), f.get()) != out.size()) return CannotWrite(path);
  return "";
}

std::string WriteHistogramJson(const std::string& path, const v1::HistogramResponse& h) {
  File f = Open(path);
  if (!f) return CannotWrite(path);
  std::string out = fmt::format(
      "{{\n  \"bins\": {},\n  \"lo\": {},\n  \"hi\": {},\n  \"total\": {},\n  \"variant\": "
      "\"{}\",\n  \"gpu_ns\": {},\n  \"histograms\": [",
      h.bins(), h.lo(), h.hi(), h.total(), h.variant(), h.timing().gpu_ns());
  for (int i = 0; i < h.histograms_size(); ++i) {
    out += i ? ",\n    [" : "\n    [";
    const auto& c = h.histograms(i).counts();
    for (int b = 0; b < c.size(); ++b) out += fmt::format("{}{}", b ? ", " : "", c[b]);
    out += "]";
  }
  out += "\n  ]\n}\n";
  if (std::fwrite(out.data(), 1, out.size(), f.get()) != out.size()) return CannotWrite(path);
  return "";
}

std::string NpyDescr(v1::SampleFormat format) {
  switch (format) {
    case v1::SAMPLE_FORMAT_UINT16:
      return "<u2";
    case v1::SAMPLE_FORMAT_FLOAT32:
      return "<f4";
    default:
      return "|u1";
  }
}

std::string WriteNpyHeader(std::FILE* f, const std::string& descr,
                           const std::vector<uint64_t>& shape) {
  std::string dims;
  for (uint64_t d : shape) dims += fmt::format("{}, ", d);
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  std::string dict =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  // Magic (6) + version (2) + length (2) + dict + padding + '\n' is a multiple of 64.
  const size_t total = (10 + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - 10 - dict.size() - 1, ' ');
  dict += '\n';
  std::string header("\x93NUMPY\x01\x00", 8);
  header += char(dict.size() & 0xff);
  header += char(dict.size() >> 8);
  header += dict;
  if (std::fwrite(header.data(), 1, header.size(), f) != header.size()) return "write failed";
  return "";
}

std::string WritePng(const std::string& path, int width, int height, int channels,
                     const std::string& pixels) {
  if (!stbi_write_png(path.c_str(), width, height, channels, pixels.data(), width * channels)) {
    return CannotWrite(path);
  }
  return "";
}

std::string WriteCompactCsv(const std::string& path, v1::SampleFormat format, uint32_t channels,
                            const std::string& xy, const std::string& values) {
  File f = Open(path);
  if (!f) return CannotWrite(path);
  const size_t n = xy.size() / 8;
  const size_t bytes = format == v1::SAMPLE_FORMAT_UINT16    ? 2
                       : format == v1::SAMPLE_FORMAT_FLOAT32 ? 4
                                                             : 1;
  std::string out = "x,y";
  for (uint32_t c = 0; c < channels; ++c) out += fmt::format(",v{}", c);
  out += "\n";
  for (size_t i = 0; i < n; ++i) {
    uint32_t p[2];
    std::memcpy(p, xy.data() + i * 8, 8);
    out += fmt::format("{},{}", p[0], p[1]);
    for (uint32_t c = 0; c < channels; ++c) {
      const char* v = values.data() + (i * channels + c) * bytes;
      if (bytes == 1) {
        out += fmt::format(",{}", uint8_t(*v));
      } else if (bytes == 2) {
        uint16_t s;
        std::memcpy(&s, v, 2);
        out += fmt::format(",{}", s);
      } else {
        float s;
        std::memcpy(&s, v, 4);
        out += fmt::format(",{}", s);
      }
    }
    out += "\n";
    if (out.size() > (1 << 20)) {
      if (std::fwrite(out.data(), 1, out.size(), f.get()) != out.size()) return CannotWrite(path);
      out.clear();
    }
  }
  if (std::fwrite(out.data(), 1, out.size(), f.get()) != out.size()) return CannotWrite(path);
  return "";
}

}  // namespace glimpse::client

#include "gpu/reference/integral_image.h"

#include <vector>

#include "absl/status/status.h"
#include "common/str.h"

namespace glimpse::reference {
namespace {

// S[y][x][c] = S[y-1][x][c] + sum_{i<=x} f(v[y][i][c]).
template <typename Acc, typename Sample, typename F>
std::vector<Acc> Table(const gpu::HostImage& img, F f) {
  const gpu::ImageDesc& d = img.desc;
  const size_t row = size_t(d.width) * size_t(d.channels);
  std::vector<Acc> t(row * size_t(d.height));
  std::vector<Acc> run(size_t(d.channels));
  for (int y = 0; y < d.height; ++y) {
    const Acc* above = y > 0 ? t.data() + (size_t(y) - 1) * row : nullptr;
    Acc* out = t.data() + size_t(y) * row;
    const Sample* in = reinterpret_cast<const Sample*>(img.data.data()) + size_t(y) * row;
    std::fill(run.begin(), run.end(), Acc{0});
    for (size_t i = 0; i < row; ++i) {
      Acc& r = run[i % size_t(d.channels)];
      r += f(in[i]);
      out[i] = above ? above[i] + r : r;
    }
  }
  return t;
}

}  // namespace

absl::StatusOr<gpu::IntegralTables> IntegralImage(const gpu::HostImage& image,
                                                  const gpu::IntegralImageOptions& options) {
  const gpu::ImageDesc& d = image.desc;
  if (d.channels < 1 || d.channels > 4 || d.width < 1 || d.height < 1) {
    return absl::InvalidArgumentError(StrCat("bad image: ", gpu::DescribeImage(d)));
  }
  if (absl::Status s = gpu::ValidateIntegralImageOptions(options); !s.ok()) return s;
  if (image.data.size() != d.bytes()) {
    return absl::InvalidArgumentError(
        StrCat("image data must hold ", d.bytes(), " bytes, got ", image.data.size()));
  }
  gpu::IntegralTables t;
  t.info.element = gpu::IntegralElementFor(d.type);
  auto id_u = [](uint32_t v) { return uint64_t{v}; };
  auto sq_u = [](uint32_t v) { return uint64_t{v} * v; };
  auto id_f = [](float v) { return double(v); };
  auto sq_f = [](float v) { return double(v) * double(v); };
  switch (d.type) {
    case gpu::SampleType::kUint8:
      t.sum_u = Table<uint64_t, uint8_t>(image, id_u);
      if (options.squared) t.sq_u = Table<uint64_t, uint8_t>(image, sq_u);
      break;
    case gpu::SampleType::kUint16:
      t.sum_u = Table<uint64_t, uint16_t>(image, id_u);
      if (options.squared) t.sq_u = Table<uint64_t, uint16_t>(image, sq_u);
      break;
    case gpu::SampleType::kFloat32:
      t.sum_f = Table<double, float>(image, id_f);
      if (options.squared) t.sq_f = Table<double, float>(image, sq_f);
      break;
    default:
      return absl::InvalidArgumentError(
          StrCat("unsupported sample type #", static_cast<int>(d.type)));
  }
  return t;
}

}  // namespace glimpse::reference

#include "gpu/reference/box_filter.h"

#include <type_traits>
#include <vector>

#include "absl/status/status.h"

namespace glimpse::reference {
namespace {

// Window sums along one axis of `n` samples: out[x] = sum over [x - r, x + r] of the mapped
// samples, `outside` for indices that map to -1.
template <typename Acc, typename Get>
void WindowSums(int n, int r, gpu::BorderMode mode, Acc outside, bool running, Get get,
                std::vector<Acc>* out) {
  out->assign(size_t(n), Acc{0});
  auto at = [&](int i) {
    int m = BorderIndex(i, n, mode);
    return m < 0 ? outside : get(m);
  };
  if (!running) {
    for (int x = 0; x < n; ++x) {
      Acc s{0};
      for (int i = x - r; i <= x + r; ++i) s += at(i);
      (*out)[size_t(x)] = s;
    }
    return;
  }
  Acc s{0};
  for (int i = -r; i <= r; ++i) s += at(i);
  for (int x = 0; x < n; ++x) {
    (*out)[size_t(x)] = s;
    s += at(x + r + 1);
    s -= at(x - r);
  }
}

template <typename Sample, typename Acc>
gpu::HostImage Filter(const gpu::HostImage& img, const gpu::BoxFilterOptions& o, bool integer) {
  const gpu::ImageDesc& d = img.desc;
  const int w = d.width, h = d.height, ch = d.channels;
  const Acc border = Acc(integer ? Acc(int64_t(o.border_value)) : Acc(float(o.border_value)));
  // Row sums of every image row, then column sums of those.
  std::vector<Acc> rows(size_t(w) * h * ch), line, sums;
  for (int c = 0; c < ch; ++c) {
    for (int y = 0; y < h; ++y) {
      WindowSums<Acc>(
          w, o.rx, o.border, border, integer, [&](int x) { return Acc(img.at<Sample>(x, y, c)); },
          &line);
      for (int x = 0; x < w; ++x) rows[(size_t(y) * w + x) * ch + c] = line[size_t(x)];
    }
  }
  gpu::HostImage out = gpu::HostImage::Zeros(d);
  const Acc border_row = border * Acc(2 * o.rx + 1);
  const uint64_t area = uint64_t(2 * o.rx + 1) * uint64_t(2 * o.ry + 1);
  for (int c = 0; c < ch; ++c) {
    for (int x = 0; x < w; ++x) {
      WindowSums<Acc>(
          h, o.ry, o.border, border_row, integer,
          [&](int y) { return rows[(size_t(y) * w + x) * ch + c]; }, &sums);
      for (int y = 0; y < h; ++y) {
        const Acc s = sums[size_t(y)];
        if constexpr (std::is_same_v<Acc, uint64_t>) {
          out.set<Sample>(x, y, c, Sample((2 * s + area) / (2 * area)));  // floor(s/a + 1/2)
        } else {
          out.set<float>(x, y, c, float(s / double(area)));
        }
      }
    }
  }
  return out;
}

}  // namespace

int BorderIndex(int i, int n, gpu::BorderMode mode) {
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case gpu::BorderMode::kReplicate:
      return i < 0 ? 0 : n - 1;
    case gpu::BorderMode::kConstant:
      return -1;
    case gpu::BorderMode::kReflect101:
      break;
  }
  if (n == 1) return 0;
  do {  // as OpenCV's borderInterpolate for BORDER_REFLECT_101
    i = i < 0 ? -i : 2 * n - 2 - i;
  } while (i < 0 || i >= n);
  return i;
}

absl::StatusOr<gpu::HostImage> BoxFilter(const gpu::HostImage& image,
                                         const gpu::BoxFilterOptions& options) {
  absl::StatusOr<gpu::BoxFilterOptions> o = gpu::ResolveBoxFilterOptions(image.desc, options);
  if (!o.ok()) return o.status();
  if (image.data.size() != image.desc.bytes()) {
    return absl::InvalidArgumentError("image data does not match its description");
  }
  switch (image.desc.type) {
    case gpu::SampleType::kUint8:
      return Filter<uint8_t, uint64_t>(image, *o, true);
    case gpu::SampleType::kUint16:
      return Filter<uint16_t, uint64_t>(image, *o, true);
    case gpu::SampleType::kFloat32:
      break;
  }
  return Filter<float, double>(image, *o, false);
}

}  // namespace glimpse::reference

#include "gpu/reference/histogram.h"

#include <cmath>

#include "gpu/reference/float_color.h"

namespace glimpse::reference {

using gpu::HistogramSource;
using gpu::SampleType;

absl::StatusOr<gpu::HistogramResult> Histogram(const gpu::HostImage& image,
                                               const gpu::HistogramOptions& options) {
  const gpu::ImageDesc& d = image.desc;
  absl::StatusOr<gpu::HistogramOptions> resolved = gpu::ResolveHistogramOptions(d, options);
  if (!resolved.ok()) return resolved.status();
  const gpu::HistogramOptions& o = *resolved;
  const int hists = o.source == HistogramSource::kAllChannels ? d.channels : 1;
  gpu::HistogramResult r;
  r.bins = o.bins;
  r.lo = *o.lo;
  r.hi = *o.hi;
  r.counts.assign(size_t(hists), std::vector<uint64_t>(size_t(o.bins), 0));

  if (d.type != SampleType::kFloat32) {
    const std::vector<int32_t> table = gpu::BuildIntegerBinTable(d, o);
    const bool u8 = d.type == SampleType::kUint8;
    for (int y = 0; y < d.height; ++y) {
      for (int x = 0; x < d.width; ++x) {
        auto s = [&](int c) -> uint32_t {
          return u8 ? image.at<uint8_t>(x, y, c) : image.at<uint16_t>(x, y, c);
        };
        for (int h = 0; h < hists; ++h) {
          uint32_t key = 0;
          switch (o.source) {
            case HistogramSource::kChannel:
              key = s(o.channel);
              break;
            case HistogramSource::kAllChannels:
              key = s(h);
              break;
            case HistogramSource::kLuma:
              key = (9798u * s(0) + 19235u * s(1) + 3735u * s(2) + 16384u) >> 15;
              break;
            case HistogramSource::kRgbMean:
              key = s(0) + s(1) + s(2);
              break;
          }
          if (int32_t b = table[key]; b >= 0) ++r.counts[size_t(h)][size_t(b)];
        }
      }
    }
    return r;
  }

  const double scale = double(o.bins) / (*o.hi - *o.lo);
  for (int y = 0; y < d.height; ++y) {
    for (int x = 0; x < d.width; ++x) {
      auto s = [&](int c) { return image.at<float>(x, y, c); };
      for (int h = 0; h < hists; ++h) {
        float v = 0;
        switch (o.source) {
          case HistogramSource::kChannel:
            v = s(o.channel);
            break;
          case HistogramSource::kAllChannels:
            v = s(h);
            break;
          case HistogramSource::kLuma:
            v = LumaF(s(0), s(1), s(2));
            break;
          case HistogramSource::kRgbMean:
            v = MeanF(s(0), s(1), s(2));
            break;
        }
        const double dv = v;
        if (!(dv >= *o.lo && dv < *o.hi)) continue;
        const double t = (dv - *o.lo) * scale;
        const int b = std::min(int(std::floor(t)), o.bins - 1);
        ++r.counts[size_t(h)][size_t(b)];
      }
    }
  }
  return r;
}

}  // namespace glimpse::reference

#include "gpu/reference/compaction.h"

#include <cmath>
#include <cstring>

#include "gpu/reference/float_color.h"

namespace glimpse::reference {

using gpu::CompactionSource;
using gpu::SampleType;

absl::StatusOr<gpu::CompactionResult> Compact(const gpu::HostImage& image,
                                              const gpu::CompactionOptions& options) {
  const gpu::ImageDesc& d = image.desc;
  absl::StatusOr<gpu::CompactionOptions> resolved = gpu::ResolveCompactionOptions(d, options);
  if (!resolved.ok()) return resolved.status();
  const gpu::CompactionOptions& o = *resolved;
  const bool luma = o.source == CompactionSource::kLuma;

  // The tested value as a double (exact for every sample and for the float luma).
  auto value = [&](int x, int y) -> double {
    switch (d.type) {
      case SampleType::kUint8:
      case SampleType::kUint16: {
        auto s = [&](int c) -> uint32_t {
          return d.type == SampleType::kUint8 ? image.at<uint8_t>(x, y, c)
                                              : image.at<uint16_t>(x, y, c);
        };
        if (!luma) return s(o.channel);
        return (9798u * s(0) + 19235u * s(1) + 3735u * s(2) + 16384u) >> 15;
      }
      case SampleType::kFloat32: {
        auto s = [&](int c) { return image.at<float>(x, y, c); };
        if (!luma) return s(o.channel);
        return LumaF(s(0), s(1), s(2));
      }
    }
    return 0;
  };

  gpu::CompactionResult r;
  const size_t pixel_bytes = size_t(d.channels) * size_t(gpu::BytesPerSample(d.type));
  for (int y = 0; y < d.height; ++y) {
    for (int x = 0; x < d.width; ++x) {
      const double v = value(x, y);
      if (std::isnan(v)) continue;  // a NaN passes neither inside nor outside
      const bool in = v >= o.lo && v <= o.hi;
      if (in != o.inside) continue;
      ++r.total;
      if (o.count_only || int64_t(r.returned()) >= o.max_results) continue;
      r.xy.push_back(uint32_t(x));
      r.xy.push_back(uint32_t(y));
      const uint8_t* p = image.data.data() + image.index(x, y, 0) * gpu::BytesPerSample(d.type);
      r.values.insert(r.values.end(), p, p + pixel_bytes);
    }
  }
  r.truncated = !o.count_only && r.total > r.returned();
  return r;
}

}  // namespace glimpse::reference

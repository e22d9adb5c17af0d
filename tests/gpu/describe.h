// How the gpu/ tests name an image and an analysis's options in their failure messages.
#ifndef GLIMPSE_TESTS_GPU_DESCRIBE_H_
#define GLIMPSE_TESTS_GPU_DESCRIBE_H_

#include <string>

#include "common/str.h"
#include "gpu/box_filter.h"
#include "gpu/compaction.h"
#include "gpu/histogram.h"
#include "gpu/image.h"
#include "gpu/integral_image.h"

namespace glimpse::gpu {

inline std::string Describe(const ImageDesc& d, const BoxFilterOptions& o) {
  return StrCat(DescribeImage(d), ", rx ", o.rx, " ry ", o.ry, ", ", BorderModeName(o.border), " ",
                o.border_value, ", ", BoxFilterVariantName(o.variant),
                o.tile_bytes ? StrCat(", tile_bytes ", o.tile_bytes) : "",
                o.force_two_word ? ", two-word" : "");
}

inline std::string Describe(const ImageDesc& d, const CompactionOptions& o) {
  return StrCat(DescribeImage(d), " source=", CompactionSourceName(o.source),
                " channel=", o.channel, " lo=", o.lo, " hi=", o.hi,
                o.inside ? " inside" : " outside", " max_results=", o.max_results,
                o.count_only ? " count_only" : "", " variant=", CompactionVariantName(o.variant));
}

inline std::string Describe(const ImageDesc& d, const HistogramOptions& o) {
  return StrCat(DescribeImage(d), " bins=", o.bins, " lo=", o.lo ? *o.lo : -1,
                " hi=", o.hi ? *o.hi : -1, " source=", HistogramSourceName(o.source),
                " channel=", o.channel, " variant=", HistogramVariantName(o.variant));
}

inline std::string Describe(const ImageDesc& d, const IntegralImageOptions& o) {
  return StrCat(DescribeImage(d), ", variant ", IntegralImageVariantName(o.variant),
                ", band_bytes ", o.band_bytes, o.force_two_word ? ", two-word" : "",
                o.narrow_sums ? "" : ", 8-byte sums");
}

}  // namespace glimpse::gpu

#endif  // GLIMPSE_TESTS_GPU_DESCRIBE_H_

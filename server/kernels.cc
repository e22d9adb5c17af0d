#include "server/kernels.h"

#include "gpu/str.h"
#include "server/status_util.h"

namespace glimpse::server {

absl::Status Kernels::Prepare() {
  for (gpu::SampleType type :
       {gpu::SampleType::kUint8, gpu::SampleType::kUint16, gpu::SampleType::kFloat32}) {
    auto check = [&](std::string_view kernel, const absl::Status& s) {
      return Annotate(s,
                      StrCat("preparing the ", kernel, " kernel for ", gpu::SampleTypeName(type)));
    };
    if (absl::Status s = check("histogram", histogram.Prepare(type)); !s.ok()) return s;
#if GLIMPSE_HAVE_INTEGRAL
    if (absl::Status s = check("integral image", integral.Prepare(type)); !s.ok()) return s;
#endif
#if GLIMPSE_HAVE_BOX_FILTER
    if (absl::Status s = check("box filter", box_filter.Prepare(type)); !s.ok()) return s;
#endif
#if GLIMPSE_HAVE_COMPACTION
    if (absl::Status s = check("compaction", compaction.Prepare(type)); !s.ok()) return s;
#endif
  }
  return absl::OkStatus();
}

std::vector<std::string> Kernels::Available() {
  std::vector<std::string> names = {"histogram"};
#if GLIMPSE_HAVE_INTEGRAL
  names.push_back("integral_image");
#endif
#if GLIMPSE_HAVE_COMPACTION
  names.push_back("compact");
#endif
#if GLIMPSE_HAVE_BOX_FILTER
  names.push_back("box_filter");
#endif
  return names;
}

}  // namespace glimpse::server

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
    if (absl::Status s = check("integral image", integral.Prepare(type)); !s.ok()) return s;
    if (absl::Status s = check("box filter", box_filter.Prepare(type)); !s.ok()) return s;
    if (absl::Status s = check("compaction", compaction.Prepare(type)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::vector<std::string> Kernels::Available() {
  return {"histogram", "integral_image", "compact", "box_filter"};
}

}  // namespace glimpse::server

// The one check of a variant value against an analysis's list of variants, and of a variant's
// need for subgroup ballots, with their errors.
#ifndef GLIMPSE_GPU_INTERNAL_VARIANT_CHECK_H_
#define GLIMPSE_GPU_INTERNAL_VARIANT_CHECK_H_

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/str.h"
#include "gpu/context.h"

namespace glimpse::gpu {

// OK for Enum::kAuto and the values in `concrete` (every variant but kAuto); otherwise
// "variant must be auto, a, b or c, got #N", the names from `name`.
template <typename Enum, size_t N, typename NameFn>
absl::Status CheckVariant(Enum variant, const Enum (&concrete)[N], NameFn name) {
  if (variant == Enum::kAuto ||
      std::find(std::begin(concrete), std::end(concrete), variant) != std::end(concrete)) {
    return absl::OkStatus();
  }
  std::string names = "auto";
  for (size_t i = 0; i < N; ++i) StrAppend(&names, i + 1 == N ? " or " : ", ", name(concrete[i]));
  return absl::InvalidArgumentError(
      StrCat("variant must be ", names, ", got #", static_cast<int>(variant)));
}

// OK where `device` has subgroup ballots (DeviceLimits::subgroup_ballot); otherwise the error of
// `variant`, which needs them, naming the extensions and the device.
inline absl::Status RequireSubgroupBallots(const DeviceInfo& device, std::string_view variant) {
  if (device.limits.subgroup_ballot) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat("variant ", variant,
             " needs subgroup ballots (GL_ARB_shader_ballot with GL_ARB_gpu_shader_int64), which "
             "this device (",
             device.renderer, ") does not offer; use auto or another variant"));
}

}  // namespace glimpse::gpu

#endif  // GLIMPSE_GPU_INTERNAL_VARIANT_CHECK_H_

// The integral_image request's options mapping and result size (options_fuzz.h).
#include "server/analyses/integral_image.h"
#include "tests/fuzz/options_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return glimpse::fuzz::FuzzOptions<glimpse::server::IntegralImageAnalysis>(
      data, size, [](const glimpse::v1::Analysis& a) -> const auto& { return a.integral_image(); });
}

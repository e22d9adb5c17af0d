// The box_filter request's options mapping and result size (options_fuzz.h).
#include "server/analyses/box_filter.h"
#include "tests/fuzz/options_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return glimpse::fuzz::FuzzOptions<glimpse::server::BoxFilterAnalysis>(
      data, size, [](const glimpse::v1::Analysis& a) -> const auto& { return a.box_filter(); });
}

// The request-to-options mapping of one analysis, as the server runs it before queuing a job
// (server/analyses/runner.h): MapOptions on the request, then ResultBytes (gpu/'s Resolve*Options
// and the result's size) on an image whose layout passed DescFromLayout. No GPU. Input: a
// serialized glimpse.fuzz.OptionsInput (fuzz_inputs.proto), its `analysis` set to A's.
#ifndef GLIMPSE_TESTS_FUZZ_OPTIONS_FUZZ_H_
#define GLIMPSE_TESTS_FUZZ_OPTIONS_FUZZ_H_

#include <cstddef>
#include <cstdint>

#include "common/str.h"
#include "fuzz_inputs.pb.h"
#include "server/ingest/image_ref.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_device.h"

namespace glimpse::fuzz {

// `request` picks A's request out of v1::Analysis.
template <typename A, typename Get>
int FuzzOptions(const uint8_t* data, size_t size, Get request) {
  OptionsInput in;
  if (!in.ParseFromArray(data, int(size))) return 0;
  const server::ServiceLimits limits;
  absl::StatusOr<gpu::ImageDesc> desc =
      server::DescFromLayout(in.layout(), "layout", kDevice, limits);
  CheckRefusal(desc.status());
  if (!desc.ok()) return 0;
  absl::StatusOr<typename A::Options> options = A::MapOptions(request(in.analysis()));
  CheckRefusal(options.status());
  if (!options.ok()) return 0;
  // The result buffer's part: an eighth of --result-buffer-bytes, which is at least 64 KiB.
  const uint64_t part_bytes = std::max<uint64_t>(in.part_bytes(), 8192);
  absl::StatusOr<uint64_t> bytes = A::ResultBytes(*desc, *options, part_bytes);
  CheckRefusal(bytes.status());
  if (!bytes.ok()) return 0;
  // Sizes of a valid image are small numbers: a wrapped computation shows up as a huge one.
  Check(*bytes > 0 && *bytes < (uint64_t{1} << 40),
        StrCat(A::kName, " result of ", *bytes, " bytes for ", gpu::DescribeImage(*desc)));
  absl::StatusOr<uint64_t> again = A::ResultBytes(*desc, *options, part_bytes);
  Check(again.ok() && *again == *bytes, StrCat(A::kName, ": ResultBytes is not repeatable"));
  return 0;
}

}  // namespace glimpse::fuzz

#endif  // GLIMPSE_TESTS_FUZZ_OPTIONS_FUZZ_H_

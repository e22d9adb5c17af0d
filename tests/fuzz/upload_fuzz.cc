// The upload stream's assembly (UploadBuffer, shared by UploadImage and Analyze): the header's
// layout and totals against the limits, chunks of any sizes, the final size checks and the decode.
// Input: a serialized glimpse.fuzz.UploadInput (fuzz_inputs.proto).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/str.h"
#include "fuzz_inputs.pb.h"
#include "server/ingest/upload.h"
#include "server/rpc/call.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_device.h"

namespace glimpse::fuzz {
namespace {

void Run(const UploadInput& in) {
  server::ServiceLimits limits;
  // Bounded so that one input stays within milliseconds and a few MiB.
  limits.max_upload_bytes = std::min<uint64_t>(in.max_upload_bytes(), 1 << 20);
  limits.max_image_pixels = std::clamp<uint64_t>(in.max_image_pixels(), 1, 1 << 18);
  if (in.messages().empty()) return;
  server::CallRecord record("UploadImage");
  server::UploadBuffer buffer(limits, kDevice, nullptr, "header");
  // The reactor's rule: the header comes in the first message only.
  if (!in.messages(0).has_header()) return;
  absl::Status s = buffer.SetHeader(in.messages(0).header(), record);
  CheckRefusal(s);
  if (!s.ok()) return;
  std::string sent;
  for (const v1::UploadImageRequest& m : in.messages()) {
    s = buffer.Append(m.chunk());
    CheckRefusal(s);
    if (!s.ok()) return;
    sent += m.chunk();
    Check(sent.size() <= limits.max_upload_bytes,
          StrCat("took ", sent.size(), " bytes over a limit of ", limits.max_upload_bytes));
  }
  s = buffer.Complete();
  CheckRefusal(s);
  if (!s.ok()) return;
  const v1::UploadHeader& header = in.messages(0).header();
  Check(header.total_bytes() == 0 || header.total_bytes() == sent.size(),
        StrCat("total_bytes ", header.total_bytes(), " accepted for ", sent.size()));
  absl::StatusOr<std::shared_ptr<server::Input>> read = buffer.TakeImage(record);
  CheckRefusal(read.status());
  if (!read.ok()) return;
  Check((*read)->host.has_value() && (*read)->desc == (*read)->host->desc, "no host pixels");
  const gpu::HostImage* image = &*(*read)->host;
  const gpu::ImageDesc& d = image->desc;
  Check(image->data.size() == d.bytes(), StrCat(image->data.size(), " bytes for ", d.bytes()));
  Check(uint64_t(d.pixels()) <= limits.max_image_pixels,
        StrCat(gpu::DescribeImage(d), " over ", limits.max_image_pixels, " pixels"));
  Check(gpu::ValidateImageDesc(d, kDevice).ok(), StrCat(gpu::DescribeImage(d), " is invalid"));
  if (header.has_raw()) {
    Check(std::string(image->data.begin(), image->data.end()) == sent,
          "raw pixels differ from the bytes sent");
  }
}

}  // namespace
}  // namespace glimpse::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  glimpse::fuzz::UploadInput in;
  if (!in.ParseFromArray(data, int(size))) return 0;
  glimpse::fuzz::Run(in);
  return 0;
}

// The upload stream's assembly (UploadBuffer, shared by UploadImage and Analyze): the header's
// layout and totals against the limits, chunks of any sizes, the final size checks and the decode;
// the same stream for a GPU (3-channel images widened on the host) reaching the same verdict and
// the same pixels.
// Input: a serialized glimpse.fuzz.UploadInput (fuzz_inputs.proto).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/str.h"
#include "fuzz_inputs.pb.h"
#include "server/ingest/upload.h"
#include "server/rpc/call.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_device.h"

namespace glimpse::fuzz {
namespace {

// The same stream into an UploadBuffer for a GPU (plain uploads: 3-channel images widened to
// four channels on the host), step by step: the same verdict at each step, and the same pixels.
void CheckSameForAGpu(const server::ServiceLimits& limits, const UploadInput& in,
                      const absl::Status& cpu_verdict, const server::Input* cpu_image) {
  gpu::DeviceLimits gpu_device = kDevice;
  gpu_device.plain_uploads = true;
  server::CallRecord record("UploadImage");
  server::UploadBuffer buffer(limits, gpu_device, nullptr, "header");
  absl::Status s = buffer.SetHeader(in.messages(0).header(), record);
  for (int i = 0; s.ok() && i < in.messages_size(); ++i) s = buffer.Append(in.messages(i).chunk());
  if (s.ok()) s = buffer.Complete();
  absl::StatusOr<std::shared_ptr<server::Input>> read;
  if (s.ok()) {
    read = buffer.TakeImage(record);
    s = read.status();
  }
  Check(s.code() == cpu_verdict.code() && s.message() == cpu_verdict.message(),
        StrCat("for a GPU: ", s.ToString(), "; for a CPU renderer: ", cpu_verdict.ToString()));
  if (!s.ok() || cpu_image == nullptr) return;
  const server::Input& gpu_image = **read;
  Check(gpu_image.host.has_value() && gpu_image.desc == cpu_image->desc,
        "a GPU's upload describes the image otherwise");
  const std::vector<uint8_t>& pixels =
      gpu_image.widened.empty() ? gpu_image.host->data
                                : gpu::NarrowFromUpload(gpu_image.desc, gpu_image.widened);
  Check(pixels == cpu_image->host->data,
        StrCat("a GPU's upload of ", gpu::DescribeImage(gpu_image.desc), " differs"));
}

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
  if (!s.ok()) return CheckSameForAGpu(limits, in, s, nullptr);
  std::string sent;
  for (const v1::UploadImageRequest& m : in.messages()) {
    s = buffer.Append(m.chunk());
    CheckRefusal(s);
    if (!s.ok()) return CheckSameForAGpu(limits, in, s, nullptr);
    sent += m.chunk();
    Check(sent.size() <= limits.max_upload_bytes,
          StrCat("took ", sent.size(), " bytes over a limit of ", limits.max_upload_bytes));
  }
  s = buffer.Complete();
  CheckRefusal(s);
  if (!s.ok()) return CheckSameForAGpu(limits, in, s, nullptr);
  const v1::UploadHeader& header = in.messages(0).header();
  Check(header.total_bytes() == 0 || header.total_bytes() == sent.size(),
        StrCat("total_bytes ", header.total_bytes(), " accepted for ", sent.size()));
  absl::StatusOr<std::shared_ptr<server::Input>> read = buffer.TakeImage(record);
  CheckRefusal(read.status());
  CheckSameForAGpu(limits, in, read.status(), read.ok() ? read->get() : nullptr);
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

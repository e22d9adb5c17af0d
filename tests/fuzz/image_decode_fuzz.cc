// The encoded-image path of uploads and inline images: the header probe, the --max-image-pixels
// check before decoding, the decode (server/ingest: libjpeg-turbo, PNG's own chunk walk, libdeflate
// inflate and unfiltering, libwebp, stb_image), the same decode into rows a stride apart in a
// buffer that ends where the last row does, the EXIF orientation (against the file decoded as
// stored, turned by the tests' reference), the decode for a GPU (3-channel images straight into
// four-channel rows), the decode into staging memory's row layouts, and (for small uint8 and uint16
// results) a PNG round trip through the server's encoder.
// Input: one byte whose value mod 5 is desired_channels, then the file.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "common/str.h"
#include "server/ingest/decode.h"
#include "server/ingest/image_codec.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/orientation_reference.h"

namespace glimpse::fuzz {
namespace {

// Large enough for every header path, small enough that a decode stays within milliseconds.
constexpr uint64_t kMaxPixels = uint64_t{1} << 20;

void Run(const uint8_t* data, size_t size) {
  if (size < 1) return;
  const int desired = data[0] % 5;
  const std::span<const uint8_t> file(data + 1, size - 1);

  absl::StatusOr<gpu::ImageDesc> probed = server::ProbeEncoded(file, "file");
  CheckRefusal(probed.status());
  server::ingest::ImageFormat format{};
  absl::StatusOr<gpu::HostImage> image =
      server::DecodeEncoded(file, desired, kMaxPixels, "file", &format);
  CheckRefusal(image.status());
  if (!image.ok()) return;
  Check(probed.ok(), "decoded a file whose header probe failed");
  const gpu::ImageDesc& d = image->desc;
  Check(d.width == probed->width && d.height == probed->height && d.type == probed->type,
        StrCat("decoded ", gpu::DescribeImage(d), ", probed ", gpu::DescribeImage(*probed)));
  Check(uint64_t(d.pixels()) <= kMaxPixels, StrCat("decoded ", d.pixels(), " pixels"));
  Check(d.channels == (desired != 0 ? desired : probed->channels),
        StrCat("decoded ", d.channels, " channels, asked ", desired));
  Check(image->data.size() == d.bytes(), StrCat(image->data.size(), " bytes for ", d.bytes()));

  absl::StatusOr<server::ingest::Probed> probe = server::ingest::Probe(file, "file");
  Check(probe.ok() && probe->format == format && probe->desc == *probed, "Probe disagrees");

  // The EXIF orientation: the file decoded as stored, then turned by the tests' own reference,
  // gives the same image.
  absl::StatusOr<gpu::HostImage> stored = server::DecodeEncoded(
      file, desired, kMaxPixels, "file", nullptr, server::ingest::Orientation::kAsStored);
  Check(stored.ok(), StrCat("decoded turned, not as stored: ", stored.status().ToString()));
  gpu::ImageDesc shown;
  const std::vector<uint8_t> turned =
      testing::TurnedAsExifSays(stored->data, stored->desc, probe->orientation, &shown);
  Check(shown == d && turned == image->data,
        StrCat("orientation ", probe->orientation, " of ", gpu::DescribeImage(stored->desc),
               " differs from the reference"));

  // Rows 3 bytes apart beyond their length: the same pixels, the gaps untouched.
  const size_t row = d.row_bytes(), stride = row + 3;
  std::vector<uint8_t> strided(stride * size_t(d.height - 1) + row, 0x5A);
  const absl::Status s =
      server::ingest::DecodeInto(file, *probe, d.channels, strided, stride, "file");
  Check(s.ok(), StrCat("DecodeInto with a stride: ", s.ToString()));
  for (size_t y = 0; y < size_t(d.height); ++y) {
    Check(std::memcmp(&strided[y * stride], &image->data[y * row], row) == 0,
          StrCat("strided row ", y, " differs"));
    for (size_t i = row; i < stride && y + 1 < size_t(d.height); ++i) {
      Check(strided[y * stride + i] == 0x5A, StrCat("the gap after row ", y, " was written"));
    }
  }

  // For a GPU (plain uploads), 3-channel images decode straight into rows widened to four
  // channels: the same pixels once narrowed, and no 3-channel copy.
  gpu::DeviceLimits gpu_device;
  gpu_device.plain_uploads = true;
  absl::StatusOr<server::DecodedImage> wide =
      server::DecodeEncodedFor(gpu_device, file, desired, kMaxPixels, "file");
  Check(wide.ok(), StrCat("DecodeEncodedFor a GPU: ", wide.status().ToString()));
  if (d.channels == 3) {
    Check(wide->host.data.empty() && wide->widened.size() == gpu::WidenedBytes(d) &&
              gpu::NarrowFromUpload(d, wide->widened) == image->data,
          StrCat("widened decode of ", gpu::DescribeImage(d), " differs"));
  } else {
    Check(wide->widened.empty() && wide->host.data == image->data,
          StrCat("decode for a GPU of ", gpu::DescribeImage(d), " differs"));
  }

  // Into staging memory's layout for either kind of device (gpu::StagedRowsFor: 16-byte packed
  // rows on CPU renderers, four-channel rows for 3-channel images on GPUs), as the server decodes
  // large images: the same pixels read back, the rows' padding zeroed.
  for (bool plain : {false, true}) {
    gpu::DeviceLimits device;
    device.plain_uploads = plain;
    const gpu::StagedRows layout = gpu::StagedRowsFor(device, d);
    std::vector<uint8_t> staged(layout.bytes(d), 0xA5);
    const absl::Status st = server::ingest::DecodeInto(file, *probe, layout.channels, staged,
                                                       layout.row_stride, "file");
    Check(st.ok(), StrCat("DecodeInto staging rows: ", st.ToString()));
    gpu::ClearRowPadding(layout, d, staged);
    Check(
        gpu::UnstageRows(layout, d, staged) == image->data,
        StrCat("staged decode of ", gpu::DescribeImage(d), plain ? " for a GPU" : "", " differs"));
    const size_t used =
        size_t(d.width) * size_t(layout.channels) * size_t(gpu::BytesPerSample(d.type));
    for (size_t y = 0; y < size_t(d.height); ++y) {
      for (size_t i = used; i < layout.row_stride; ++i) {
        Check(staged[y * layout.row_stride + i] == 0,
              StrCat("staged row ", y, " padding not zero"));
      }
    }
  }

  if (d.type == gpu::SampleType::kFloat32 || d.pixels() > 4096) return;
  absl::StatusOr<std::string> png = server::EncodePng(*image);
  Check(png.ok(), StrCat("EncodePng: ", png.status().ToString()));
  absl::StatusOr<gpu::HostImage> again = server::DecodeEncoded(
      std::span(reinterpret_cast<const uint8_t*>(png->data()), png->size()), 0, kMaxPixels, "png");
  Check(again.ok() && again->desc == d && again->data == image->data,
        StrCat("PNG round trip of ", gpu::DescribeImage(d), " differs"));
}

}  // namespace
}  // namespace glimpse::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  glimpse::fuzz::Run(data, size);
  return 0;
}

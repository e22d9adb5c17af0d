// The per-format decoders behind server/ingest/decode.h, one file each: decode_jpeg.cc
// (TurboJPEG), decode_png.cc (libdeflate + own unfiltering; libspng reads the header),
// decode_webp.cc (libwebp), decode_stb.cc (stb_image: BMP, GIF, TGA, PSD, HDR, PNM); the EXIF
// orientation (orientation.cc); and the helpers they share (decode.cc). Included by those files
// only; callers use Probe and DecodeInto.
//
//   absl::StatusOr<Probed> probed = ProbePng(file, field);          // after Sniff said PNG
//   if (!probed.ok()) return probed.status();
//   return DecodePng(file, *probed, channels, out, row_stride, field);
#ifndef GLIMPSE_SERVER_INGEST_DECODERS_H_
#define GLIMPSE_SERVER_INGEST_DECODERS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpu/image.h"
#include "server/ingest/decode.h"

namespace glimpse::server::ingest {

// The formats decoded, for messages.
inline constexpr std::string_view kFormats = "JPEG, PNG, WebP, BMP, GIF, TGA, PSD, HDR, PNM";

// INVALID_ARGUMENT: "`field` is a truncated or corrupt `format` file: `reason`".
absl::Status Corrupt(std::string_view field, ImageFormat format, std::string_view reason);
bool StartsWith(std::span<const uint8_t> f, std::string_view prefix);
// Where a JPEG file's SOI marker starts (after any 0xFF fill bytes); npos if none.
size_t JpegStart(std::span<const uint8_t> f);
// Bytes of one row of `desc`'s width at `channels` channels of its sample type.
size_t RowBytes(const gpu::ImageDesc& desc, int channels);
// `count` pixels of `from` channels to `to` channels by stb_image's rules (decode.h's comment).
void ConvertRow(gpu::SampleType type, const uint8_t* src, int from, uint8_t* dst, int to,
                size_t count);

// The EXIF block (TIFF data) of a JPEG file (an APP1 segment "Exif\0\0"), a PNG file (an eXIf
// chunk before the image data) or a WebP file (an EXIF chunk); empty where there is none, or the
// file is of another format (server/ingest/orientation.cc).
std::span<const uint8_t> FindExif(std::span<const uint8_t> file, ImageFormat format);
// The orientation (1-8) that an EXIF block's first IFD gives; 1 where it gives none, or a value
// outside 1-8, or the block cannot be read (as viewers and OpenCV take such files: unturned).
int ExifOrientation(std::span<const uint8_t> exif);
// Copies the image of `width` x `height` pixels of `pixel_bytes` each at `src` (rows
// `src_stride` bytes apart) to `dst` (rows `dst_stride` apart) turned or mirrored as EXIF
// orientation `orientation` (1-8) says: for 5-8, `dst` is `height` pixels wide and `width` high.
void Reorient(int orientation, const uint8_t* src, int width, int height, size_t pixel_bytes,
              size_t src_stride, uint8_t* dst, size_t dst_stride);

// Each format's Probe and DecodeInto, with decode.h's contracts; DecodeInto has checked the
// channels and the output's size.
absl::StatusOr<Probed> ProbeJpeg(std::span<const uint8_t> file, std::string_view field);
absl::Status DecodeJpeg(std::span<const uint8_t> file, const Probed& probed, int channels,
                        std::span<uint8_t> out, size_t row_stride, std::string_view field);
absl::StatusOr<Probed> ProbePng(std::span<const uint8_t> file, std::string_view field);
absl::Status DecodePng(std::span<const uint8_t> file, const Probed& probed, int channels,
                       std::span<uint8_t> out, size_t row_stride, std::string_view field);
absl::StatusOr<Probed> ProbeWebp(std::span<const uint8_t> file, std::string_view field);
absl::Status DecodeWebp(std::span<const uint8_t> file, const Probed& probed, int channels,
                        std::span<uint8_t> out, size_t row_stride, std::string_view field);
// `sniffed`: the format the signature named (none: TGA, which has no signature).
absl::StatusOr<Probed> ProbeStb(std::span<const uint8_t> file, std::optional<ImageFormat> sniffed,
                                std::string_view field);
absl::Status DecodeStb(std::span<const uint8_t> file, const Probed& probed, int channels,
                       std::span<uint8_t> out, size_t row_stride, std::string_view field);

}  // namespace glimpse::server::ingest

#endif  // GLIMPSE_SERVER_INGEST_DECODERS_H_

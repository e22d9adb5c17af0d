// Encoded image files -> host pixels, on the host (never on the GPU thread): JPEG with
// libjpeg-turbo's TurboJPEG API, PNG with libdeflate + own unfiltering (decode_png.cc: the whole
// image data inflated at once, the header read by libspng), WebP with libwebp, and BMP, GIF, TGA,
// PSD, HDR and PNM with stb_image. The format is found from the file's signature, its size from the
// header, so a caller checks the size (and allocates) before any pixel is decoded:
//
//   absl::StatusOr<Probed> probed = Probe(file, "image.encoded.data");
//   if (!probed.ok()) return probed.status();
//   ... check probed->desc against the limits, allocate rows of `stride` bytes ...
//   absl::Status s = DecodeInto(file, *probed, channels, out, stride, "image.encoded.data");
//
// Pixels are those stb_image decodes, with its channel conversions (grey -> RGB replicates,
// RGB -> grey is its luma (77 R + 150 G + 29 B) >> 8, a missing alpha is opaque), except JPEG,
// whose pixels are libjpeg-turbo's own (grey from a colour JPEG is its Y channel). Animated WebP
// files are refused. CRC errors in PNG files, and libjpeg-turbo's warnings (a truncated or corrupt
// JPEG), are errors; PNM and HDR files cut short are refused, while BMP, TGA and PSD files cut
// short decode with the missing pixels zero (stb_image does not notice).
#ifndef GLIMPSE_SERVER_INGEST_DECODE_H_
#define GLIMPSE_SERVER_INGEST_DECODE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpu/image.h"

namespace glimpse::server::ingest {

enum class ImageFormat { kJpeg, kPng, kWebp, kBmp, kGif, kTga, kPsd, kHdr, kPnm };

// "JPEG", "PNG", "WebP", "BMP", "GIF", "TGA", "PSD", "HDR", "PNM".
std::string_view ImageFormatName(ImageFormat format);

// What becomes of a file's EXIF orientation tag (JPEG: an APP1 segment; PNG: an eXIf chunk; WebP:
// an EXIF chunk), which cameras and phones write instead of turning the pixels they store.
enum class Orientation {
  // Turned or mirrored as the tag says: the image as viewers show it, and as OpenCV's
  // cv2.imdecode gives JPEG and PNG files (IMREAD_COLOR and IMREAD_GRAYSCALE). One more pass over
  // the pixels, for files whose tag is not 1.
  kFromFile,
  // The pixels in the order the file stores them, the tag ignored (IMREAD_IGNORE_ORIENTATION).
  kAsStored,
};

struct Probed {
  ImageFormat format = ImageFormat::kPng;
  // The decoded image's size, channels and sample type (16-bit PNG/PNM/PSD: uint16, HDR: float32,
  // else uint8): the file's own, its width and height swapped where it is turned a quarter.
  gpu::ImageDesc desc;
  // The EXIF orientation (1-8) the decode applies; 1: none (no tag, a tag of 1, or kAsStored).
  int orientation = 1;
};

// The format from the file's signature (TGA has none: it is what stb_image reads when no signature
// matched), then its header and, for JPEG, PNG and WebP under kFromFile, its EXIF orientation.
// Reads no pixel data. Errors (INVALID_ARGUMENT) name `field`, the format found and the decoder's
// own message; an EXIF block that cannot be read is no error (the file is taken as unturned).
absl::StatusOr<Probed> Probe(std::span<const uint8_t> file, std::string_view field,
                             Orientation orientation = Orientation::kFromFile);

// Decodes `file`, probed as `probed`, into `out` as rows of probed.desc.width * channels samples
// of probed.desc.type, `row_stride` bytes apart; the bytes between rows are left as they are. A
// turned or mirrored file (probed.orientation != 1) is decoded into memory of its own first.
// channels (1-4) is the file's own or another (converted as the comment at the top says).
// REQUIRES: row_stride >= the row's bytes, out.size() >= row_stride * (height - 1) + row bytes.
absl::Status DecodeInto(std::span<const uint8_t> file, const Probed& probed, int channels,
                        std::span<uint8_t> out, size_t row_stride, std::string_view field);

}  // namespace glimpse::server::ingest

#endif  // GLIMPSE_SERVER_INGEST_DECODE_H_

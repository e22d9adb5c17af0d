// Images: their description, host-side pixels, and the GPU-resident form the kernels read.
//
//   HostImage host = HostImage::Zeros({.width = 640, .height = 480, .channels = 3});
//   host.set<uint8_t>(10, 20, 0, 255);  // x, y, channel
//   absl::StatusOr<Image> image = Image::Upload(ctx, host);
//   if (!image.ok()) return image.status();  // e.g. a side past the device's limit
//   HostImage back = image->Download();  // back.data == host.data
#ifndef GLIMPSE_GPU_IMAGE_H_
#define GLIMPSE_GPU_IMAGE_H_

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "gpu/context.h"
#include "gpu/gl_handles.h"
#include "gpu/staging.h"

namespace glimpse::gpu {

enum class SampleType { kUint8, kUint16, kFloat32 };

int BytesPerSample(SampleType type);
std::string_view SampleTypeName(SampleType type);  // "uint8", "uint16", "float32"

// Row-major pixels, channels interleaved, samples little-endian, rows tightly packed.
struct ImageDesc {
  int width = 0;
  int height = 0;
  int channels = 0;  // 1 to 4
  SampleType type = SampleType::kUint8;

  int64_t pixels() const { return int64_t{width} * height; }
  size_t row_bytes() const { return size_t(width) * channels * BytesPerSample(type); }
  size_t bytes() const { return row_bytes() * size_t(height); }
  bool operator==(const ImageDesc&) const = default;
};

std::string DescribeImage(const ImageDesc& desc);  // "640x480 3-channel uint8"

// OK if the device can hold an image so described, else INVALID_ARGUMENT naming the field, the
// value and the limit. The one owner of these rules: `field`, if not empty, prefixes the fields'
// names as a request names them ("image.raw.layout" -> "image.raw.layout.width must be ...").
absl::Status ValidateImageDesc(const ImageDesc& desc, const DeviceLimits& limits,
                               std::string_view field = {});

// Pixels in host memory (the layout of ImageDesc).
struct HostImage {
  ImageDesc desc;
  std::vector<uint8_t> data;

  static HostImage Zeros(const ImageDesc& desc) {
    return {desc, std::vector<uint8_t>(desc.bytes())};
  }
  size_t index(int x, int y, int c) const {
    return (size_t(y) * desc.width + x) * desc.channels + c;
  }
  template <typename T>
  T at(int x, int y, int c) const {
    T v;
    std::memcpy(&v, data.data() + index(x, y, c) * sizeof(T), sizeof(T));
    return v;
  }
  template <typename T>
  void set(int x, int y, int c, T v) {
    std::memcpy(data.data() + index(x, y, c) * sizeof(T), &v, sizeof(T));
  }
  // The sample as a double, whatever the type.
  double value(int x, int y, int c) const;
};

// Width in texels of an image's packed form: its rows as raw bytes, 16 per RGBA32UI texel, each
// row padded with zeros to a whole texel.
inline int PackedTexelsPerRow(const ImageDesc& desc) { return int((desc.row_bytes() + 15) / 16); }

// How an image's rows sit in staging memory (gpu/staging.h) for the device's upload to take them as
// they are: on devices with plain_uploads, the plain texture's rows (3 channels widened to 4, the
// fourth never read), tightly packed; on CPU renderers, the packed form's rows (the image's own
// samples, each row padded with zeros to whole 16-byte texels), so that the packed copy is made
// where the pixels are written, in the same pass.
struct StagedRows {
  int channels = 0;       // samples per pixel in the rows
  size_t row_stride = 0;  // bytes from one row to the next
  size_t bytes(const ImageDesc& d) const { return row_stride * size_t(d.height); }
  bool operator==(const StagedRows&) const = default;
};
StagedRows StagedRowsFor(const DeviceLimits& device, const ImageDesc& desc);
// Writes `pixels` (desc's rows, ImageDesc layout) into `out` (at least layout.bytes(desc)) as
// `layout` lays them out, padding included.
void StageRows(const StagedRows& layout, const ImageDesc& desc, std::span<const uint8_t> pixels,
               std::span<uint8_t> out);
// The same with each row y (desc.row_bytes() bytes) where `row(y)` says, valid until the next call.
void StageRows(const StagedRows& layout, const ImageDesc& desc,
               absl::FunctionRef<const uint8_t*(int y)> row, std::span<uint8_t> out);
// Zeroes the bytes of each row past its samples (after a decoder wrote the samples alone).
void ClearRowPadding(const StagedRows& layout, const ImageDesc& desc, std::span<uint8_t> rows);
// The image's own rows (ImageDesc layout) read from rows laid out as `layout`.
std::vector<uint8_t> UnstageRows(const StagedRows& layout, const ImageDesc& desc,
                                 std::span<const uint8_t> staged);

// A width x height RGBA32UI texture (a packed form, or a kernel's side image in that layout),
// allocated with sides that are never a power of two where the texture limit allows, as every
// texture of an Image is (gpu/image.cc says why). REQUIRES: ctx's thread.
GlTexture NewRgba32uiTexture(Context& ctx, int width, int height);

// Writes `pixels` (desc's rows, ImageDesc layout) as packed-form rows (PackedTexelsPerRow(desc)
// texels each) into rows [y0, y0 + desc.height) of the RGBA32UI texture bound to GL_TEXTURE_2D.
// Rows that are not whole texels go through a padded copy (`scratch`, reused between calls): GL's
// unpack row length counts whole texels. REQUIRES: the context's thread.
void WritePackedRows(int y0, const ImageDesc& desc, const uint8_t* pixels,
                     std::vector<uint8_t>& scratch);

// An image on the GPU: a 2D texture of a sized integer (8/16-bit) or float format, read by the
// kernels with texelFetch from texture unit 0 (allocated a texel or a row larger where a side
// would be a power of two: see image.cc). Move-only. REQUIRES: the context's thread.
//
// An image may also hold a packed form: the same bytes in an RGBA32UI texture
// (PackedTexelsPerRow(desc) x height, allocated a texel or a row larger where a side would be a
// power of two: see image.cc), read with imageLoad, 16 bytes per load. CPU renderers run
// storage and texture reads one SIMD lane at a time but an image load of a wide texel at once, so
// the kernels made for them read this form. On CPU renderers (where "GPU" memory is host memory)
// an upload makes only the packed form, and the plain texture is made from it the first time a
// kernel reads it (texture(), Bind()); elsewhere the upload makes the plain texture, and the
// packed form is made on first use (EnsurePacked).
class Image {
 public:
  Image() = default;
  // Its textures go to the context's pool of freed textures (gpu/texture_pool.h).
  ~Image();
  Image(Image&&) noexcept = default;
  Image& operator=(Image&&) noexcept = default;
  // Uploads `pixels` (exactly desc.bytes() of them, ImageDesc layout).
  static absl::StatusOr<Image> Upload(Context& ctx, const ImageDesc& desc,
                                      std::span<const uint8_t> pixels);
  static absl::StatusOr<Image> Upload(Context& ctx, const HostImage& host) {
    return Upload(ctx, host.desc, host.data);
  }
  // The same, given the rows WidenForUpload made of `pixels` (empty: widened here if needed). On
  // devices with plain_uploads a 3-channel image may come as its widened rows alone (`pixels`
  // empty: decoded straight into them), whose fourth lanes are never read.
  static absl::StatusOr<Image> Upload(Context& ctx, const ImageDesc& desc,
                                      std::span<const uint8_t> pixels,
                                      std::span<const uint8_t> widened);
  // The same from staging memory: `rows` holds desc's rows as StagedRowsFor(ctx.limits(), desc)
  // lays them out, and comes from ctx.staging()'s arena. The device reads the block after this
  // returns (a fence keeps its bytes from being handed out again before).
  static absl::StatusOr<Image> Upload(Context& ctx, const ImageDesc& desc,
                                      const StagingBlock& rows);
  // An image with undefined contents, to be written by a kernel (see CopyFromBuffer).
  static absl::StatusOr<Image> Allocate(Context& ctx, const ImageDesc& desc);
  // An image holding only its packed form, contents undefined until written with
  // CopyPackedRowsFromBuffer: for kernels that write that layout, so that their results are
  // written once. The plain texture is made from the packed form on first use (texture(),
  // Bind(), CopyRows()); Download() reads the packed form directly.
  static absl::StatusOr<Image> AllocatePacked(Context& ctx, const ImageDesc& desc);

  // Writes a host image of this image's channels and sample type (`pixels`, or its widened rows
  // as Upload takes them) into the plain texture at rows [y0, y0 + part.height), columns
  // [0, part.width): for atlases of several small images (an Allocate'd image), each written
  // straight from its own memory. The packed form, if any, is not updated.
  absl::Status WriteRows(Context& ctx, int y0, const ImageDesc& part,
                         std::span<const uint8_t> pixels, std::span<const uint8_t> widened);
  // Replaces the contents with `buffer`'s bytes from `offset` on, in ImageDesc layout.
  absl::Status CopyFromBuffer(Context& ctx, const Buffer& buffer, size_t offset = 0);
  // Reads the pixels back (waits for the GPU).
  HostImage Download() const;
  // Rows [y0, y0 + rows) as an image of their own, copied on the GPU (the packed form too).
  absl::StatusOr<Image> CopyRows(Context& ctx, int y0, int rows) const;

  const ImageDesc& desc() const { return desc_; }
  // Makes the plain texture first if the image holds only its packed form.
  GLuint texture() const;
  // The memory the image holds on the device, the packed form included.
  size_t gpu_bytes() const {
    return desc_.bytes() + (packed_ ? size_t(PackedTexelsPerRow(desc_)) * 16 * desc_.height : 0);
  }
  // Binds the texture to texture unit `unit` (the shared prelude reads unit 0).
  void Bind(GLuint unit = 0) const;

  bool has_packed() const { return bool(packed_); }
  GLuint packed_texture() const { return packed_.get(); }
  // Makes the packed form if the image has none yet (reads the pixels back once to do it). The
  // packed form is a cache of the image's own pixels, so this is const; gpu_bytes() grows.
  absl::Status EnsurePacked(Context& ctx) const;
  // The packed form's rows read back, PackedTexelsPerRow(desc) * 16 bytes each (the texture's
  // spare texels and rows left out); none where the image has no packed form.
  std::vector<uint8_t> PackedRows() const;
  // Binds the packed form read-only to image unit `unit` as rgba32ui. REQUIRES: has_packed().
  void BindPacked(GLuint unit) const;
  // Writes rows [y0, y0 + rows) of the packed form (made if missing, its other rows undefined
  // until written) from `buffer`'s bytes at `offset`, PackedTexelsPerRow(desc) * 16 per row: for
  // kernels whose output is already in that layout, so their results need no round trip.
  absl::Status CopyPackedRowsFromBuffer(Context& ctx, const Buffer& buffer, size_t offset, int y0,
                                        int rows);

 private:
  // An image of `desc` with no texture yet.
  Image(Context& ctx, const ImageDesc& desc);
  absl::Status MakePacked(Context& ctx, std::span<const uint8_t> pixels) const;
  void MakePlainFromPacked() const;
  std::vector<uint8_t> ReadPackedRows(size_t row) const;

  Context* ctx_ = nullptr;  // whose pool takes the textures back
  ImageDesc desc_;
  // The plain texture's sides: desc_'s, or a texel or a row more where a side would be a power of
  // two (image.cc, TextureSide).
  int plain_width_ = 0, plain_height_ = 0;
  mutable GlTexture texture_;  // empty while only the packed form exists (AllocatePacked)
  mutable GlTexture packed_;
};

// The image the kernels' WarmUp() runs every program on for this type and channel count, at
// least min_width x min_height. One shape meets every compiled variant a driver makes of a
// program for any shape: llvmpipe compiles a variant per power-of-two-ness of each bound
// texture's sides, and no texture of an Image has a side that is one.
ImageDesc WarmUpShape(SampleType type, int channels, int min_width = 1, int min_height = 1);

// `pixels` 3-channel pixels of `type` from `src` widened to four channels at `dst`, the fourth
// sample 0 or, with `opaque`, an opaque alpha (the integer types' largest value, 1.0 for float).
void WidenPixels(SampleType type, const uint8_t* src, size_t pixels, uint8_t* dst, bool opaque);
// A 3-channel image's rows widened to the four channels (the fourth 0) of the texture
// Image::Upload fills on devices with plain_uploads, made on any thread (the decoder's) so that
// the context's thread need not; empty where the device takes the pixels as they are.
std::vector<uint8_t> WidenForUpload(const DeviceLimits& device, const HostImage& host);
// The bytes of a 3-channel image's rows so widened: width * height * 4 samples.
size_t WidenedBytes(const ImageDesc& desc);
// The image's own (ImageDesc layout) rows from its widened ones, whatever their fourth lanes.
std::vector<uint8_t> NarrowFromUpload(const ImageDesc& desc, std::span<const uint8_t> widened);

// "#define" lines telling the shader prelude how to read this image: FMT_UINT or FMT_FLOAT,
// CHANNELS, SAMPLE_BITS.
std::string ImageDefines(const ImageDesc& desc);

}  // namespace glimpse::gpu

#endif  // GLIMPSE_GPU_IMAGE_H_

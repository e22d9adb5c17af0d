#include "gpu/image.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "common/str.h"

namespace glimpse::gpu {
namespace {

struct GlFormat {
  GLenum internal_format;
  GLenum format;
  GLenum type;
};

// A 3-channel image's plain texture has four channels, the fourth unused (0 where written from
// host memory): NVIDIA's driver moves 3-channel texels between host memory and a texture a texel
// at a time on the CPU. On an H100 (driver 580) a 1920x1080 RGB upload took 27.9 ms, 28 of the
// 44 ms of a whole 1080p JPEG histogram call, and an 8K one 271 ms against 25.5 ms for RGBA
// (bench/results/nvidia_h100.md). So host memory and these textures trade rows widened to four
// channels here (WidenRows, NarrowRows); copies from buffers on the device keep 3-channel rows.
int PlainChannels(int channels) { return channels == 3 ? 4 : channels; }
constexpr size_t kWidenBandBytes = size_t{8} << 20;

// The plain texture's internal format, and the transfer format and type of rows of `channels`
// samples (the image's own count for copies from device buffers, PlainChannels for host memory).
GlFormat GlFormatFor(const ImageDesc& d, int channels) {
  static constexpr GLenum kInt[] = {GL_RED_INTEGER, GL_RG_INTEGER, GL_RGB_INTEGER, GL_RGBA_INTEGER};
  static constexpr GLenum kFloat[] = {GL_RED, GL_RG, GL_RGB, GL_RGBA};
  static constexpr GLenum kU8[] = {GL_R8UI, GL_RG8UI, GL_RGB8UI, GL_RGBA8UI};
  static constexpr GLenum kU16[] = {GL_R16UI, GL_RG16UI, GL_RGB16UI, GL_RGBA16UI};
  static constexpr GLenum kF32[] = {GL_R32F, GL_RG32F, GL_RGB32F, GL_RGBA32F};
  const int i = PlainChannels(d.channels) - 1, t = channels - 1;
  switch (d.type) {
    case SampleType::kUint8:
      return {kU8[i], kInt[t], GL_UNSIGNED_BYTE};
    case SampleType::kUint16:
      return {kU16[i], kInt[t], GL_UNSIGNED_SHORT};
    case SampleType::kFloat32:
      break;
  }
  return {kF32[i], kFloat[t], GL_FLOAT};
}
GlFormat HostFormatFor(const ImageDesc& d) { return GlFormatFor(d, PlainChannels(d.channels)); }
size_t PlainTexelBytes(const ImageDesc& d) {
  return size_t(PlainChannels(d.channels)) * size_t(BytesPerSample(d.type));
}

// The pixels of 8- and 16-bit images: each pixel's 3 samples and the next pixel's first, loaded as
// one word, the fourth sample masked and set to `fourth` (little-endian), so that a pixel is one
// load and one store (2.4x a byte at a time: 0.18 against 0.44 ms for 960x540 RGB); the last
// pixel, whose next does not exist, from a copy of its own samples.
template <typename Word>
void WidenWords(const uint8_t* src, size_t pixels, uint8_t* dst, Word fourth) {
  constexpr size_t kPixel = 3 * sizeof(Word) / 4;
  constexpr Word kMask = Word(~Word{0}) >> (8 * sizeof(Word) / 4);
  static_assert(std::endian::native == std::endian::little, "samples in little-endian words");
  if (pixels == 0) return;
  Word w;
  for (size_t i = 0; i + 1 < pixels; ++i, src += kPixel, dst += sizeof(Word)) {
    std::memcpy(&w, src, sizeof(Word));
    w = (w & kMask) | fourth;
    std::memcpy(dst, &w, sizeof(Word));
  }
  w = 0;
  std::memcpy(&w, src, kPixel);
  w |= fourth;
  std::memcpy(dst, &w, sizeof(Word));
}

}  // namespace

void WidenPixels(SampleType type, const uint8_t* src, size_t pixels, uint8_t* dst, bool opaque) {
  switch (type) {
    case SampleType::kUint8:
      return WidenWords<uint32_t>(src, pixels, dst, opaque ? uint32_t{0xff} << 24 : 0);
    case SampleType::kUint16:
      return WidenWords<uint64_t>(src, pixels, dst, opaque ? uint64_t{0xffff} << 48 : 0);
    case SampleType::kFloat32:
      break;
  }
  const float fourth = opaque ? 1.0f : 0.0f;
  for (size_t i = 0; i < pixels; ++i, src += 12, dst += 16) {
    std::memcpy(dst, src, 12);
    std::memcpy(dst + 12, &fourth, 4);
  }
}

namespace {

// `rows` rows of a 3-channel image (ImageDesc layout, from `src`) widened to four channels, the
// fourth 0, into `dst`.
void WidenRows(const ImageDesc& d, const uint8_t* src, int rows, uint8_t* dst) {
  WidenPixels(d.type, src, size_t(d.width) * size_t(rows), dst, /*opaque=*/false);
}

// `pixels` four-channel texels of samples of S bytes from `src` to three-channel pixels at `dst`;
// `dst` may be `src` (narrowed in place: each texel is read before its pixel is written, and
// writes never pass the reads). Fixed-size moves, not a call to memmove per pixel.
template <size_t S>
void NarrowPixels(const uint8_t* src, size_t pixels, uint8_t* dst) {
  for (size_t i = 0; i < pixels; ++i, src += 4 * S, dst += 3 * S) {
    uint8_t t[3 * S];
    std::memcpy(t, src, 3 * S);
    std::memcpy(dst, t, 3 * S);
  }
}

void NarrowPixels(SampleType type, const uint8_t* src, size_t pixels, uint8_t* dst) {
  switch (BytesPerSample(type)) {
    case 1:
      return NarrowPixels<1>(src, pixels, dst);
    case 2:
      return NarrowPixels<2>(src, pixels, dst);
    default:
      return NarrowPixels<4>(src, pixels, dst);
  }
}

// Rows of four-channel texels narrowed in place to the 3-channel image's own layout.
void NarrowRows(const ImageDesc& d, int rows, std::vector<uint8_t>& data) {
  const size_t pixels = size_t(d.width) * size_t(rows);
  NarrowPixels(d.type, data.data(), pixels, data.data());
  data.resize(pixels * 3 * size_t(BytesPerSample(d.type)));
}

// Packed and plain textures of images come from the context's pool of freed ones where one of
// the same shape is kept (gpu/texture_pool.h), and go back to it with their image.
GlTexture NewPackedTexture(Context& ctx, const ImageDesc& desc) {
  const int texels = PackedTexelsPerRow(desc);
  return ctx.textures().Take(GL_RGBA32UI, texels, desc.height,
                             [&] { return NewRgba32uiTexture(ctx, texels, desc.height); });
}
size_t PackedTextureBytes(const ImageDesc& desc) {
  return size_t(PackedTexelsPerRow(desc)) * 16 * size_t(desc.height);
}

// The side a texture of n texels is allocated with: every texture's sides are never a power of
// two (one or two spare texels or rows, never read) where the texture limit allows. llvmpipe
// compiles a variant of a program per power-of-two-ness of each bound texture's sides, and keeps
// only so many compiled variants (it evicts the least recently used past a total instruction
// count): with one shape class for every texture, each program is compiled once, at the warm-up,
// whatever the shapes of the images it later reads.
int TextureSide(const Context& ctx, int n) {
  int m = n;
  while ((m & (m - 1)) == 0) ++m;  // 1 -> 3, 2 -> 3, 4 -> 5, ...
  return m <= ctx.limits().max_texture_size ? m : n;
}

// A width x height texture of the image's format (sides from TextureSide).
GlTexture NewPlainTexture(const ImageDesc& desc, int width, int height) {
  GlTexture t = GlTexture::Create();
  glBindTexture(GL_TEXTURE_2D, t.get());
  glTexStorage2D(GL_TEXTURE_2D, 1, HostFormatFor(desc).internal_format, width, height);
  // Integer textures are incomplete with linear filtering; the kernels use texelFetch anyway.
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  glBindTexture(GL_TEXTURE_2D, 0);
  return t;
}

GlTexture PooledPlainTexture(Context& ctx, const ImageDesc& desc, int width, int height) {
  return ctx.textures().Take(HostFormatFor(desc).internal_format, width, height,
                             [&] { return NewPlainTexture(desc, width, height); });
}

// Level 0 of `texture`, `rows` rows of `row` bytes each from its first texel: glGetTexImage reads
// the whole texture, spare texels and rows included (texel_bytes each), and the rows are then
// moved down in place and the rest cut off.
std::vector<uint8_t> ReadTextureRows(GLuint texture, GLenum format, GLenum type, size_t texel_bytes,
                                     size_t row, int rows) {
  GLint width = 0, height = 0;
  glBindTexture(GL_TEXTURE_2D, texture);
  glGetTexLevelParameteriv(GL_TEXTURE_2D, 0, GL_TEXTURE_WIDTH, &width);
  glGetTexLevelParameteriv(GL_TEXTURE_2D, 0, GL_TEXTURE_HEIGHT, &height);
  const size_t texture_row = size_t(width) * texel_bytes;
  std::vector<uint8_t> all(texture_row * size_t(height));
  glMemoryBarrier(GL_TEXTURE_UPDATE_BARRIER_BIT);
  glGetTexImage(GL_TEXTURE_2D, 0, format, type, all.data());
  glBindTexture(GL_TEXTURE_2D, 0);
  if (row != texture_row) {
    for (int y = 1; y < rows; ++y) {
      std::memmove(all.data() + row * size_t(y), all.data() + texture_row * size_t(y), row);
    }
  }
  all.resize(row * size_t(rows));
  return all;
}

}  // namespace

GlTexture NewRgba32uiTexture(Context& ctx, int width, int height) {
  GlTexture t = GlTexture::Create();
  glBindTexture(GL_TEXTURE_2D, t.get());
  glTexStorage2D(GL_TEXTURE_2D, 1, GL_RGBA32UI, TextureSide(ctx, width), TextureSide(ctx, height));
  glBindTexture(GL_TEXTURE_2D, 0);
  return t;
}

int BytesPerSample(SampleType type) {
  switch (type) {
    case SampleType::kUint8:
      return 1;
    case SampleType::kUint16:
      return 2;
    case SampleType::kFloat32:
      return 4;
  }
  return 1;
}

std::string_view SampleTypeName(SampleType type) {
  switch (type) {
    case SampleType::kUint8:
      return "uint8";
    case SampleType::kUint16:
      return "uint16";
    case SampleType::kFloat32:
      return "float32";
  }
  return "unknown";
}

std::string DescribeImage(const ImageDesc& d) {
  return StrCat(d.width, "x", d.height, " ", d.channels, "-channel ", SampleTypeName(d.type));
}

absl::Status ValidateImageDesc(const ImageDesc& d, const DeviceLimits& limits,
                               std::string_view field) {
  const std::string_view dot = field.empty() ? "" : ".";
  if (d.channels < 1 || d.channels > 4) {
    return absl::InvalidArgumentError(
        StrCat(field, dot, "channels must be in [1, 4], got ", d.channels));
  }
  const int max = limits.max_texture_size;
  if (d.width < 1 || d.width > max) {
    return absl::InvalidArgumentError(StrCat(field, dot, "width must be in [1, ", max,
                                             "] (the device's texture limit), got ", d.width));
  }
  if (d.height < 1 || d.height > max) {
    return absl::InvalidArgumentError(StrCat(field, dot, "height must be in [1, ", max,
                                             "] (the device's texture limit), got ", d.height));
  }
  return absl::OkStatus();
}

double HostImage::value(int x, int y, int c) const {
  switch (desc.type) {
    case SampleType::kUint8:
      return at<uint8_t>(x, y, c);
    case SampleType::kUint16:
      return at<uint16_t>(x, y, c);
    case SampleType::kFloat32:
      break;
  }
  return at<float>(x, y, c);
}

absl::StatusOr<Image> Image::Allocate(Context& ctx, const ImageDesc& desc) {
  if (absl::Status s = ValidateImageDesc(desc, ctx.limits()); !s.ok()) return s;
  (void)ctx.CheckGlError("before allocating an image");
  Image image(ctx, desc);
  image.texture_ = PooledPlainTexture(ctx, desc, image.plain_width_, image.plain_height_);
  if (absl::Status s = ctx.CheckGlError(StrCat("allocating a ", DescribeImage(desc), " image"));
      !s.ok()) {
    return s;
  }
  return image;
}

absl::StatusOr<Image> Image::AllocatePacked(Context& ctx, const ImageDesc& desc) {
  if (absl::Status s = ValidateImageDesc(desc, ctx.limits()); !s.ok()) return s;
  (void)ctx.CheckGlError("before allocating an image");
  Image image(ctx, desc);
  image.packed_ = NewPackedTexture(ctx, desc);
  if (absl::Status s = ctx.CheckGlError(
          StrCat("allocating the packed form of a ", DescribeImage(desc), " image"));
      !s.ok()) {
    return s;
  }
  return image;
}

Image::Image(Context& ctx, const ImageDesc& desc)
    : ctx_(&ctx),
      desc_(desc),
      plain_width_(TextureSide(ctx, desc.width)),
      plain_height_(TextureSide(ctx, desc.height)) {}

Image::~Image() {
  if (ctx_ == nullptr) return;
  ctx_->textures().Give(std::move(texture_), HostFormatFor(desc_).internal_format, plain_width_,
                        plain_height_,
                        size_t(plain_width_) * size_t(plain_height_) * PlainTexelBytes(desc_));
  ctx_->textures().Give(std::move(packed_), GL_RGBA32UI, PackedTexelsPerRow(desc_), desc_.height,
                        PackedTextureBytes(desc_));
}

GLuint Image::texture() const {
  if (!texture_ && packed_) MakePlainFromPacked();
  return texture_.get();
}

// The packed form's rows, read back, into a new plain texture.
void Image::MakePlainFromPacked() const {
  const GlFormat f = HostFormatFor(desc_);
  const size_t packed_row = size_t(PackedTexelsPerRow(desc_)) * 16;
  const std::vector<uint8_t> packed = PackedRows();
  GlTexture plain = PooledPlainTexture(*ctx_, desc_, plain_width_, plain_height_);
  glBindTexture(GL_TEXTURE_2D, plain.get());
  std::vector<uint8_t> wide(desc_.channels == 3 ? size_t(desc_.width) * PlainTexelBytes(desc_) : 0);
  for (int y = 0; y < desc_.height; ++y) {
    const uint8_t* row = packed.data() + packed_row * size_t(y);
    if (!wide.empty()) {
      WidenRows(desc_, row, 1, wide.data());
      row = wide.data();
    }
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, y, desc_.width, 1, f.format, f.type, row);
  }
  glBindTexture(GL_TEXTURE_2D, 0);
  texture_ = std::move(plain);
}

absl::StatusOr<Image> Image::Upload(Context& ctx, const ImageDesc& desc,
                                    std::span<const uint8_t> pixels) {
  return Upload(ctx, desc, pixels, {});
}

std::vector<uint8_t> WidenForUpload(const DeviceLimits& device, const HostImage& host) {
  const ImageDesc& d = host.desc;
  if (!device.plain_uploads || d.channels != 3 || host.data.size() != d.bytes()) return {};
  std::vector<uint8_t> wide(WidenedBytes(d));
  WidenRows(d, host.data.data(), d.height, wide.data());
  return wide;
}

size_t WidenedBytes(const ImageDesc& desc) {
  return size_t(desc.width) * size_t(desc.height) * PlainTexelBytes(desc);
}

std::vector<uint8_t> NarrowFromUpload(const ImageDesc& desc, std::span<const uint8_t> widened) {
  return UnstageRows({PlainChannels(desc.channels), size_t(desc.width) * PlainTexelBytes(desc)},
                     desc, widened);
}

absl::StatusOr<Image> Image::Upload(Context& ctx, const ImageDesc& desc,
                                    std::span<const uint8_t> pixels,
                                    std::span<const uint8_t> widened) {
  if (absl::Status s = ValidateImageDesc(desc, ctx.limits()); !s.ok()) return s;
  const bool only_widened = pixels.empty() && desc.channels == 3 && ctx.limits().plain_uploads &&
                            widened.size() == WidenedBytes(desc);
  if (pixels.size() != desc.bytes() && !only_widened) {
    return absl::InvalidArgumentError(StrCat("pixels must hold ", desc.bytes(), " bytes for a ",
                                             DescribeImage(desc), " image, got ", pixels.size()));
  }
  if (!ctx.limits().plain_uploads) {
    // CPU renderers: the packed form only, one copy at memcpy speed (its texels are whole 16-byte
    // words). The kernels made for these renderers read nothing else; the plain texture is made
    // from it on first use by a kernel that reads it. Copying into the plain texture here would
    // cost more than the rest of the upload: llvmpipe converts 3-byte (RGB) texels one at a time,
    // 5.7 ms for a 1920x1080 RGB image against 0.49 ms for its packed form and 0.49 ms for a
    // memcpy of the same bytes (bench/upload_bench, 2 cores, llvmpipe).
    Image image(ctx, desc);
    if (absl::Status s = image.MakePacked(ctx, pixels); !s.ok()) return s;
    return image;
  }
  absl::StatusOr<Image> image = Allocate(ctx, desc);
  if (!image.ok()) return image.status();
  if (absl::Status s = image->WriteRows(ctx, 0, desc, pixels, widened); !s.ok()) return s;
  return image;
}

absl::StatusOr<Image> Image::Upload(Context& ctx, const ImageDesc& desc, const StagingBlock& rows) {
  if (absl::Status s = ValidateImageDesc(desc, ctx.limits()); !s.ok()) return s;
  StagingBuffer* staging = ctx.staging();
  const StagedRows layout = StagedRowsFor(ctx.limits(), desc);
  if (staging == nullptr || !rows.from(*staging->arena()) ||
      rows.bytes().size() < layout.bytes(desc)) {
    return absl::InternalError(StrCat("Upload: a staging block of ", rows.bytes().size(),
                                      " bytes that is not this context's or not the ",
                                      layout.bytes(desc), " a ", DescribeImage(desc),
                                      " image needs"));
  }
  (void)ctx.CheckGlError("before uploading an image");
  Image image(ctx, desc);
  const auto* offset = reinterpret_cast<const void*>(rows.offset());
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, staging->buffer(rows));
  if (!ctx.limits().plain_uploads) {
    // The packed form's rows, padding included, exactly as its texels lie (see Upload above).
    image.packed_ = NewPackedTexture(ctx, desc);
    glBindTexture(GL_TEXTURE_2D, image.packed_.get());
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, PackedTexelsPerRow(desc), desc.height, GL_RGBA_INTEGER,
                    GL_UNSIGNED_INT, offset);
  } else {
    const GlFormat f = HostFormatFor(desc);
    image.texture_ = PooledPlainTexture(ctx, desc, image.plain_width_, image.plain_height_);
    glBindTexture(GL_TEXTURE_2D, image.texture_.get());
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, desc.width, desc.height, f.format, f.type, offset);
  }
  glBindTexture(GL_TEXTURE_2D, 0);
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
  staging->Read(rows);
  if (absl::Status s = ctx.CheckGlError(
          StrCat("uploading a ", DescribeImage(desc), " image from staging memory"));
      !s.ok()) {
    return s;
  }
  return image;
}

StagedRows StagedRowsFor(const DeviceLimits& device, const ImageDesc& desc) {
  if (!device.plain_uploads) return {desc.channels, size_t(PackedTexelsPerRow(desc)) * 16};
  return {PlainChannels(desc.channels), size_t(desc.width) * PlainTexelBytes(desc)};
}

void StageRows(const StagedRows& layout, const ImageDesc& desc, std::span<const uint8_t> pixels,
               std::span<uint8_t> out) {
  const size_t row = desc.row_bytes();
  StageRows(
      layout, desc, [&](int y) { return pixels.data() + row * size_t(y); }, out);
}

void StageRows(const StagedRows& layout, const ImageDesc& desc,
               absl::FunctionRef<const uint8_t*(int y)> row_at, std::span<uint8_t> out) {
  const size_t row = desc.row_bytes();
  for (int y = 0; y < desc.height; ++y) {
    const uint8_t* src = row_at(y);
    uint8_t* dst = out.data() + layout.row_stride * size_t(y);
    if (layout.channels != desc.channels) {
      WidenRows(desc, src, 1, dst);
    } else {
      std::memcpy(dst, src, row);
    }
  }
  ClearRowPadding(layout, desc, out);
}

void ClearRowPadding(const StagedRows& layout, const ImageDesc& desc, std::span<uint8_t> rows) {
  const size_t used = size_t(desc.width) * size_t(layout.channels) * BytesPerSample(desc.type);
  if (used == layout.row_stride) return;
  for (int y = 0; y < desc.height; ++y) {
    std::memset(rows.data() + layout.row_stride * size_t(y) + used, 0, layout.row_stride - used);
  }
}

std::vector<uint8_t> UnstageRows(const StagedRows& layout, const ImageDesc& desc,
                                 std::span<const uint8_t> staged) {
  std::vector<uint8_t> rows(desc.bytes());
  const size_t row = desc.row_bytes();
  for (int y = 0; y < desc.height; ++y) {
    const uint8_t* src = staged.data() + layout.row_stride * size_t(y);
    uint8_t* dst = rows.data() + row * size_t(y);
    if (layout.channels == desc.channels) {
      std::memcpy(dst, src, row);
    } else {  // four-channel rows of a 3-channel image (StagedRowsFor)
      NarrowPixels(desc.type, src, size_t(desc.width), dst);
    }
  }
  return rows;
}

absl::Status Image::WriteRows(Context& ctx, int y0, const ImageDesc& part,
                              std::span<const uint8_t> pixels, std::span<const uint8_t> widened) {
  if (part.channels != desc_.channels || part.type != desc_.type || part.width > desc_.width ||
      y0 < 0 || y0 + part.height > desc_.height) {
    return absl::InternalError(StrCat("WriteRows: a ", DescribeImage(part), " image at row ", y0,
                                      " of a ", DescribeImage(desc_), " image"));
  }
  const GlFormat f = HostFormatFor(part);
  glBindTexture(GL_TEXTURE_2D, texture());
  const size_t wide_row = size_t(part.width) * PlainTexelBytes(part);
  if (part.channels != 3 || widened.size() == wide_row * size_t(part.height)) {
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, y0, part.width, part.height, f.format, f.type,
                    part.channels != 3 ? pixels.data() : widened.data());
  } else {
    // Widened a band of rows at a time (kWidenBandBytes each), so a large image needs no second
    // copy of itself in host memory.
    const int band = int(std::clamp<size_t>(kWidenBandBytes / wide_row, 1, size_t(part.height)));
    std::vector<uint8_t> wide(wide_row * size_t(band));
    for (int y = 0; y < part.height; y += band) {
      const int rows = std::min(band, part.height - y);
      WidenRows(part, pixels.data() + size_t(y) * part.row_bytes(), rows, wide.data());
      glTexSubImage2D(GL_TEXTURE_2D, 0, 0, y0 + y, part.width, rows, f.format, f.type, wide.data());
    }
  }
  glBindTexture(GL_TEXTURE_2D, 0);
  return ctx.CheckGlError("uploading an image");
}

void WritePackedRows(int y0, const ImageDesc& desc, const uint8_t* pixels,
                     std::vector<uint8_t>& scratch) {
  const int texels = PackedTexelsPerRow(desc);
  const size_t row = desc.row_bytes(), padded_row = size_t(texels) * 16;
  const uint8_t* src = pixels;
  if (padded_row != row) {
    scratch.assign(padded_row * size_t(desc.height), 0);
    for (int y = 0; y < desc.height; ++y) {
      std::memcpy(scratch.data() + size_t(y) * padded_row, pixels + size_t(y) * row, row);
    }
    src = scratch.data();
  }
  glTexSubImage2D(GL_TEXTURE_2D, 0, 0, y0, texels, desc.height, GL_RGBA_INTEGER, GL_UNSIGNED_INT,
                  src);
}

absl::Status Image::MakePacked(Context& ctx, std::span<const uint8_t> pixels) const {
  GlTexture packed = NewPackedTexture(ctx, desc_);
  glBindTexture(GL_TEXTURE_2D, packed.get());
  std::vector<uint8_t> scratch;
  WritePackedRows(0, desc_, pixels.data(), scratch);
  glBindTexture(GL_TEXTURE_2D, 0);
  if (absl::Status s =
          ctx.CheckGlError(StrCat("making the packed form of a ", DescribeImage(desc_), " image"));
      !s.ok()) {
    return s;
  }
  packed_ = std::move(packed);
  return absl::OkStatus();
}

absl::Status Image::EnsurePacked(Context& ctx) const {
  if (packed_) return absl::OkStatus();
  const HostImage host = Download();
  return MakePacked(ctx, host.data);
}

absl::StatusOr<Image> Image::CopyRows(Context& ctx, int y0, int rows) const {
  if (y0 < 0 || rows < 1 || y0 + rows > desc_.height) {
    return absl::InternalError(
        StrCat("CopyRows: rows [", y0, ", ", y0 + rows, ") of a ", DescribeImage(desc_), " image"));
  }
  ImageDesc desc = desc_;
  desc.height = rows;
  absl::StatusOr<Image> part = Allocate(ctx, desc);
  if (!part.ok()) return part.status();
  glCopyImageSubData(texture(), GL_TEXTURE_2D, 0, 0, y0, 0, part->texture(), GL_TEXTURE_2D, 0, 0, 0,
                     0, desc.width, rows, 1);
  if (packed_) {
    const int texels = PackedTexelsPerRow(desc);
    GlTexture packed = NewPackedTexture(ctx, desc);
    glCopyImageSubData(packed_.get(), GL_TEXTURE_2D, 0, 0, y0, 0, packed.get(), GL_TEXTURE_2D, 0, 0,
                       0, 0, texels, rows, 1);
    part->packed_ = std::move(packed);
  }
  if (absl::Status s = ctx.CheckGlError("copying rows of an image"); !s.ok()) return s;
  return part;
}

void Image::BindPacked(GLuint unit) const {
  glBindImageTexture(unit, packed_.get(), 0, GL_FALSE, 0, GL_READ_ONLY, GL_RGBA32UI);
}

absl::Status Image::CopyPackedRowsFromBuffer(Context& ctx, const Buffer& buffer, size_t offset,
                                             int y0, int rows) {
  const int texels = PackedTexelsPerRow(desc_);
  if (y0 < 0 || rows < 0 || y0 + rows > desc_.height ||
      offset + size_t(texels) * 16 * size_t(rows) > buffer.bytes()) {
    return absl::InternalError("CopyPackedRowsFromBuffer: rows outside the image or the buffer");
  }
  if (!packed_) packed_ = NewPackedTexture(ctx, desc_);
  glMemoryBarrier(GL_PIXEL_BUFFER_BARRIER_BIT | GL_TEXTURE_UPDATE_BARRIER_BIT);
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, buffer.get());
  glBindTexture(GL_TEXTURE_2D, packed_.get());
  glTexSubImage2D(GL_TEXTURE_2D, 0, 0, y0, texels, rows, GL_RGBA_INTEGER, GL_UNSIGNED_INT,
                  reinterpret_cast<const void*>(offset));
  glBindTexture(GL_TEXTURE_2D, 0);
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
  return ctx.CheckGlError("copying a buffer into an image's packed form");
}

absl::Status Image::CopyFromBuffer(Context& ctx, const Buffer& buffer, size_t offset) {
  if (offset + desc_.bytes() > buffer.bytes()) {
    return absl::InternalError("CopyFromBuffer: the buffer is smaller than the image");
  }
  const GlFormat f = GlFormatFor(desc_, desc_.channels);  // the buffer's rows: the image's layout
  glMemoryBarrier(GL_PIXEL_BUFFER_BARRIER_BIT | GL_TEXTURE_UPDATE_BARRIER_BIT);
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, buffer.get());
  glBindTexture(GL_TEXTURE_2D, texture());
  glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, desc_.width, desc_.height, f.format, f.type,
                  reinterpret_cast<const void*>(offset));
  glBindTexture(GL_TEXTURE_2D, 0);
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
  if (absl::Status s = ctx.CheckGlError("copying a buffer into an image"); !s.ok()) return s;
  if (!packed_ && !ctx.info().software) return absl::OkStatus();
  // The packed form follows the new contents: a round trip through host memory, which on CPU
  // renderers is a copy within the same memory.
  packed_ = GlTexture();
  return EnsurePacked(ctx);
}

HostImage Image::Download() const {
  if (!texture_ && packed_) {
    // Only the packed form exists: its rows, each cut to the image's own row.
    return {desc_, ReadPackedRows(desc_.row_bytes())};
  }
  const GlFormat f = HostFormatFor(desc_);
  const size_t texel_bytes = PlainTexelBytes(desc_);
  std::vector<uint8_t> rows = ReadTextureRows(texture(), f.format, f.type, texel_bytes,
                                              size_t(desc_.width) * texel_bytes, desc_.height);
  if (desc_.channels == 3) NarrowRows(desc_, desc_.height, rows);
  return {desc_, std::move(rows)};
}

std::vector<uint8_t> Image::PackedRows() const {
  return ReadPackedRows(size_t(PackedTexelsPerRow(desc_)) * 16);
}

std::vector<uint8_t> Image::ReadPackedRows(size_t row) const {
  if (!packed_) return {};  // texture 0 is the default texture, which holds nothing of the image
  return ReadTextureRows(packed_.get(), GL_RGBA_INTEGER, GL_UNSIGNED_INT, 16, row, desc_.height);
}

void Image::Bind(GLuint unit) const {
  glActiveTexture(GL_TEXTURE0 + unit);
  glBindTexture(GL_TEXTURE_2D, texture());
}

ImageDesc WarmUpShape(SampleType type, int channels, int min_width, int min_height) {
  return {std::max(3, min_width), std::max(3, min_height), channels, type};
}

std::string ImageDefines(const ImageDesc& d) {
  return StrCat(d.type == SampleType::kFloat32 ? "#define FMT_FLOAT 1\n" : "#define FMT_UINT 1\n",
                "#define CHANNELS ", d.channels, "\n#define SAMPLE_BITS ",
                8 * BytesPerSample(d.type), "\n");
}

}  // namespace glimpse::gpu

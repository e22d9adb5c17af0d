// Images' uploads and the pool of freed textures they reuse (gpu/image.h, gpu/texture_pool.h).
#include "gpu/image.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "gpu/box_filter.h"
#include "gpu/compaction.h"
#include "gpu/context.h"
#include "gpu/histogram.h"
#include "gpu/integral_image.h"
#include "gpu/texture_pool.h"
#include "tests/gpu_test_env.h"

namespace glimpse::gpu {
namespace {

TEST(ImageTest, RoundTripsEveryFormatAndChannelCount) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  for (SampleType t : {SampleType::kUint8, SampleType::kUint16, SampleType::kFloat32}) {
    for (int c = 1; c <= 4; ++c) {
      ImageDesc d{.width = 37, .height = 5, .channels = c, .type = t};
      HostImage host = testing::RandomImage(d, rng);
      auto img = Image::Upload(ctx, host);
      ASSERT_TRUE(img.ok()) << img.status();
      EXPECT_EQ(img->Download().data, host.data) << DescribeImage(d);
    }
  }
}

// The GPU renderers' upload (DeviceLimits::plain_uploads), forced on whatever renderer this is, on
// a context of its own (its own thread): 3-channel images go into four-channel textures, widened
// by the upload in 8 MiB bands (a float image of several bands, odd widths) or beforehand by
// WidenForUpload, and come back narrowed, exactly; other channel counts go in as they are.
TEST(ImageTest, PlainUploadsWidenThreeChannelRowsAndReadBackExactly) {
  GLIMPSE_REQUIRE_DEVICE();  // the shared context stays on this thread
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  testing::OnOwnContext({.plain_uploads = true}, [&](Context& own) {
    ASSERT_TRUE(own.limits().plain_uploads);
    for (SampleType t : {SampleType::kUint8, SampleType::kUint16, SampleType::kFloat32}) {
      for (int c = 1; c <= 4; ++c) {
        const ImageDesc d{.width = t == SampleType::kFloat32 && c == 3 ? 1537 : 37,
                          .height = t == SampleType::kFloat32 && c == 3 ? 1031 : 5,
                          .channels = c,
                          .type = t};
        const HostImage host = testing::RandomImage(d, rng);
        const std::vector<uint8_t> widened = WidenForUpload(own.limits(), host);
        EXPECT_EQ(widened.size(), c == 3 ? d.bytes() / 3 * 4 : 0) << DescribeImage(d);
        if (c == 3) {  // each pixel's samples, then a zero sample
          const size_t s = size_t(BytesPerSample(t));
          std::vector<uint8_t> want(size_t(d.pixels()) * 4 * s, 0);
          for (size_t i = 0; i < size_t(d.pixels()); ++i) {
            std::copy_n(&host.data[i * 3 * s], 3 * s, &want[i * 4 * s]);
          }
          EXPECT_TRUE(widened == want) << DescribeImage(d);
        }
        for (bool given : {false, true}) {
          absl::StatusOr<Image> img =
              given ? Image::Upload(own, d, host.data, widened) : Image::Upload(own, host);
          ASSERT_TRUE(img.ok()) << img.status();
          EXPECT_FALSE(img->has_packed()) << DescribeImage(d);
          EXPECT_TRUE(img->Download().data == host.data)
              << DescribeImage(d) << (given ? ", rows widened beforehand" : "");
        }
      }
    }
  });
}

// A 3-channel image decoded straight into widened rows has opaque alpha in its fourth lanes, where
// WidenForUpload writes 0: no kernel may read them. On a context with plain uploads (a GPU's
// path), the same image uploaded both ways gives the same answers from every analysis, over every
// variant `auto` picks for either kind of device, 8-bit and 16-bit.
TEST(ImageTest, FourthLaneOfWidenedRowsIsNeverRead) {
  GLIMPSE_REQUIRE_DEVICE();
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  for (bool as_gpu : {false, true}) {
    testing::OnOwnContext({.auto_as_gpu = as_gpu, .plain_uploads = true}, [&](Context& own) {
      HistogramKernel histogram(own);
      IntegralImageKernel integral(own);
      CompactionKernel compaction(own);
      BoxFilterKernel box(own);
      for (SampleType t : {SampleType::kUint8, SampleType::kUint16}) {
        SCOPED_TRACE(::testing::Message() << (as_gpu ? "GPU variants, " : "") << SampleTypeName(t));
        const ImageDesc d{.width = 131, .height = 67, .channels = 3, .type = t};
        const HostImage host = testing::RandomImage(d, rng);
        std::vector<uint8_t> zero = WidenForUpload(own.limits(), host), opaque = zero;
        const size_t s = size_t(BytesPerSample(t));
        for (size_t i = 3 * s; i < opaque.size(); i += 4 * s) std::memset(&opaque[i], 0xFF, s);
        absl::StatusOr<Image> a = Image::Upload(own, d, host.data, zero);
        absl::StatusOr<Image> b = Image::Upload(own, d, {}, opaque);
        ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
        EXPECT_TRUE(b->Download().data == host.data);
        for (HistogramSource src : {HistogramSource::kAllChannels, HistogramSource::kLuma}) {
          HistogramOptions o;
          o.source = src;
          auto ha = histogram.Run(*a, o), hb = histogram.Run(*b, o);
          ASSERT_TRUE(ha.ok() && hb.ok()) << ha.status() << hb.status();
          EXPECT_EQ(ha->counts, hb->counts);
        }
        auto ia = ComputeIntegralImage(integral, *a, {.squared = true});
        auto ib = ComputeIntegralImage(integral, *b, {.squared = true});
        ASSERT_TRUE(ia.ok() && ib.ok()) << ia.status() << ib.status();
        EXPECT_EQ(ia->sum_u, ib->sum_u);
        EXPECT_EQ(ia->sq_u, ib->sq_u);
        const double top = t == SampleType::kUint8 ? 255 : 65535;
        for (CompactionSource src : {CompactionSource::kChannel, CompactionSource::kLuma}) {
          const CompactionOptions o{.source = src, .channel = 2, .lo = top / 2, .hi = top};
          auto ca = compaction.Run(*a, o), cb = compaction.Run(*b, o);
          ASSERT_TRUE(ca.ok() && cb.ok()) << ca.status() << cb.status();
          EXPECT_EQ(ca->xy, cb->xy);
          EXPECT_EQ(ca->values, cb->values);
        }
        for (int r : {1, 7}) {
          auto ba = box.Run(*a, {.rx = r, .ry = r}), bb = box.Run(*b, {.rx = r, .ry = r});
          ASSERT_TRUE(ba.ok() && bb.ok()) << ba.status() << bb.status();
          EXPECT_TRUE(ba->image.Download().data == bb->image.Download().data) << "r " << r;
        }
      }
    });
  }
}

// The packed form's bytes: each row's bytes, then zeros up to a whole 16-byte texel.
std::vector<uint8_t> ReadPacked(const Image& img) { return img.PackedRows(); }

// The packed texture's sides, which llvmpipe's compiled variants depend on.
std::pair<int, int> TextureSides(GLuint texture) {
  GLint w = 0, h = 0;
  glBindTexture(GL_TEXTURE_2D, texture);
  glGetTexLevelParameteriv(GL_TEXTURE_2D, 0, GL_TEXTURE_WIDTH, &w);
  glGetTexLevelParameteriv(GL_TEXTURE_2D, 0, GL_TEXTURE_HEIGHT, &h);
  glBindTexture(GL_TEXTURE_2D, 0);
  return {w, h};
}

bool PowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

std::vector<uint8_t> PaddedRows(const HostImage& host) {
  const size_t row = host.desc.row_bytes(), padded = size_t(PackedTexelsPerRow(host.desc)) * 16;
  std::vector<uint8_t> out(padded * host.desc.height, 0);
  for (int y = 0; y < host.desc.height; ++y) {
    std::copy_n(host.data.begin() + ptrdiff_t(y * row), row, out.begin() + ptrdiff_t(y * padded));
  }
  return out;
}

TEST(ImageTest, PackedFormHoldsEveryRowPaddedToWholeTexels) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  for (SampleType t : {SampleType::kUint8, SampleType::kUint16, SampleType::kFloat32}) {
    for (int c = 1; c <= 4; ++c) {
      for (int w : {1, 3, 16, 37}) {
        const ImageDesc d{.width = w, .height = w == 16 ? 4 : 5, .channels = c, .type = t};
        const HostImage host = testing::RandomImage(d, rng);
        auto img = Image::Upload(ctx, host);
        ASSERT_TRUE(img.ok()) << img.status();
        // Uploads that fill the packed form (CPU renderers') make it at once; plain ones (GPUs',
        // or GLIMPSE_TEST_AS_GPU=1) on first use.
        EXPECT_EQ(img->has_packed(), !ctx.limits().plain_uploads);
        ASSERT_TRUE(img->EnsurePacked(ctx).ok());
        EXPECT_EQ(ReadPacked(*img), PaddedRows(host)) << DescribeImage(d);
        EXPECT_EQ(img->gpu_bytes(), d.bytes() + PaddedRows(host).size());
        // One shape class for every texture, packed form and plain alike: no side a power of
        // two (w = 1 and 16, h = 4 are), and reads cut the spare texels off.
        const auto [pw, ph] = TextureSides(img->packed_texture());
        EXPECT_FALSE(PowerOfTwo(pw)) << DescribeImage(d) << ": " << pw;
        EXPECT_FALSE(PowerOfTwo(ph)) << DescribeImage(d) << ": " << ph;
        EXPECT_GE(pw, PackedTexelsPerRow(d));
        EXPECT_GE(ph, d.height);
        const auto [tw, th] = TextureSides(img->texture());
        EXPECT_FALSE(PowerOfTwo(tw)) << DescribeImage(d) << ": " << tw;
        EXPECT_FALSE(PowerOfTwo(th)) << DescribeImage(d) << ": " << th;
        EXPECT_GE(tw, d.width);
        EXPECT_GE(th, d.height);
        EXPECT_EQ(img->Download().data, host.data) << DescribeImage(d);

        // Contents replaced from a buffer: the packed form follows.
        const HostImage next = testing::RandomImage(d, rng);
        Buffer buffer = Buffer::Create(next.data.size() + 8);
        buffer.Upload(8, next.data.size(), next.data.data());
        ASSERT_TRUE(img->CopyFromBuffer(ctx, buffer, 8).ok());
        EXPECT_EQ(img->Download().data, next.data);
        EXPECT_EQ(ReadPacked(*img), PaddedRows(next)) << DescribeImage(d);
      }
    }
  }
}

TEST(ImageTest, RefusesBadDescriptionsNamingTheField) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  const int max = ctx.limits().max_texture_size;
  struct Case {
    ImageDesc desc;
    std::string expect;
  } cases[] = {
      {{0, 4, 1, SampleType::kUint8}, "width must be in [1, " + std::to_string(max) + "]"},
      {{4, 0, 1, SampleType::kUint8}, "height must be in [1, "},
      {{max + 1, 1, 1, SampleType::kUint8}, "got " + std::to_string(max + 1)},
      {{4, 4, 0, SampleType::kUint8}, "channels must be in [1, 4], got 0"},
      {{4, 4, 5, SampleType::kUint8}, "channels must be in [1, 4], got 5"},
  };
  for (const Case& c : cases) {
    auto img = Image::Allocate(ctx, c.desc);
    ASSERT_FALSE(img.ok());
    EXPECT_EQ(img.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(img.status().message().find(c.expect), std::string::npos) << img.status();
  }
  std::vector<uint8_t> short_pixels(10);
  auto img = Image::Upload(ctx, {4, 4, 1, SampleType::kUint8}, short_pixels);
  ASSERT_FALSE(img.ok());
  EXPECT_NE(img.status().message().find("pixels must hold 16 bytes"), std::string::npos);
}

GlTexture Rgba32ui(Context& ctx, int w, int h) { return NewRgba32uiTexture(ctx, w, h); }

TEST(TexturePoolTest, TakesBackAKeptTextureOfTheSameShapeOnly) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  TexturePool pool(1 << 20);
  int made = 0;
  auto make = [&] {
    ++made;
    return Rgba32ui(ctx, 5, 7);
  };
  GlTexture a = pool.Take(GL_RGBA32UI, 5, 7, make);
  const GLuint name = a.get();
  EXPECT_EQ(made, 1);
  pool.Give(std::move(a), GL_RGBA32UI, 5, 7, 5 * 7 * 16);
  EXPECT_EQ(pool.count(), 1u);
  EXPECT_EQ(pool.bytes(), 5u * 7 * 16);
  // Another shape or format: a new texture, the kept one stays.
  GlTexture b = pool.Take(GL_RGBA32UI, 7, 5, make);
  GlTexture c = pool.Take(GL_RGBA8UI, 5, 7, make);
  EXPECT_EQ(made, 3);
  EXPECT_NE(b.get(), name);
  EXPECT_EQ(pool.count(), 1u);
  GlTexture d = pool.Take(GL_RGBA32UI, 5, 7, make);
  EXPECT_EQ(made, 3);
  EXPECT_EQ(d.get(), name);
  EXPECT_EQ(pool.count(), 0u);
  EXPECT_EQ(pool.bytes(), 0u);
}

TEST(TexturePoolTest, KeepsTheNewestWithinItsBytesAndNothingLargerThanThem) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  TexturePool pool(3000);
  std::vector<GLuint> names;
  for (int i = 0; i < 4; ++i) {
    GlTexture t = Rgba32ui(ctx, 3, 3);
    names.push_back(t.get());
    pool.Give(std::move(t), GL_RGBA32UI, 3, 3, 1000);
  }
  EXPECT_EQ(pool.count(), 3u);
  EXPECT_EQ(pool.bytes(), 3000u);
  pool.Give(Rgba32ui(ctx, 3, 5), GL_RGBA32UI, 3, 5, 3001);  // over max_bytes: deleted at once
  EXPECT_EQ(pool.count(), 3u);
  // The newest first; the oldest (names[0]) was dropped.
  auto never = [] {
    ADD_FAILURE() << "made a texture while one was kept";
    return GlTexture();
  };
  EXPECT_EQ(pool.Take(GL_RGBA32UI, 3, 3, never).get(), names[3]);
  EXPECT_EQ(pool.Take(GL_RGBA32UI, 3, 3, never).get(), names[2]);
  EXPECT_EQ(pool.Take(GL_RGBA32UI, 3, 3, never).get(), names[1]);
  EXPECT_EQ(pool.count(), 0u);
  pool.Give(Rgba32ui(ctx, 3, 3), GL_RGBA32UI, 3, 3, 10);
  pool.Clear();
  EXPECT_EQ(pool.count(), 0u);
  EXPECT_EQ(pool.bytes(), 0u);
}

// An image uploaded into a texture a freed image held reads back its own pixels, in every form,
// at awkward sizes and every channel count and type: no sample of the previous image shows.
TEST(ImageTest, UploadsIntoReusedTexturesReadBackExactly) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  std::mt19937_64 rng(testing::TestSeed());
  GLIMPSE_SEED_TRACE();
  for (SampleType type : {SampleType::kUint8, SampleType::kUint16, SampleType::kFloat32}) {
    for (int channels = 1; channels <= 4; ++channels) {
      for (auto [w, h] : {std::pair{1, 1}, {17, 3}, {33, 65}, {64, 2}}) {
        const ImageDesc desc{w, h, channels, type};
        const size_t kept_before = ctx.textures().count();
        {
          absl::StatusOr<Image> first = Image::Upload(ctx, testing::RandomImage(desc, rng));
          ASSERT_TRUE(first.ok()) << first.status();
          (void)first->texture();  // both forms exist on every renderer
          ASSERT_TRUE(first->EnsurePacked(ctx).ok());
        }
        EXPECT_GE(ctx.textures().count(), kept_before) << DescribeImage(desc);
        const HostImage second = testing::RandomImage(desc, rng);
        absl::StatusOr<Image> image = Image::Upload(ctx, second);
        ASSERT_TRUE(image.ok()) << image.status();
        EXPECT_EQ(image->Download().data, second.data) << DescribeImage(desc);
        ASSERT_TRUE(image->EnsurePacked(ctx).ok());
        const std::vector<uint8_t> packed = image->PackedRows();
        const size_t packed_row = size_t(PackedTexelsPerRow(desc)) * 16;
        for (int y = 0; y < h; ++y) {
          ASSERT_TRUE(std::equal(second.data.begin() + ptrdiff_t(desc.row_bytes()) * y,
                                 second.data.begin() + ptrdiff_t(desc.row_bytes()) * (y + 1),
                                 packed.begin() + ptrdiff_t(packed_row) * y))
              << DescribeImage(desc) << " packed row " << y;
        }
        // The plain texture, made from the packed form on CPU renderers, read back through a
        // copy of its rows.
        absl::StatusOr<Image> rows = image->CopyRows(ctx, 0, h);
        ASSERT_TRUE(rows.ok()) << rows.status();
        EXPECT_EQ(rows->Download().data, second.data) << DescribeImage(desc);
      }
    }
  }
}

TEST(ImageTest, UploadRefusesPixelsOfTheWrongSizeBeforeAllocating) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  const ImageDesc desc{4, 3, 3, SampleType::kUint8};
  std::vector<uint8_t> short_pixels(desc.bytes() - 1);
  absl::StatusOr<Image> image = Image::Upload(ctx, desc, short_pixels);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().message(),
            "pixels must hold 36 bytes for a 4x3 3-channel uint8 image, got 35");
}

}  // namespace
}  // namespace glimpse::gpu

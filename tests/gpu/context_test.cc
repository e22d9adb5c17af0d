#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "gpu/context.h"
#include "gpu/image.h"
#include "tests/gpu_test_env.h"

namespace glimpse::gpu {
namespace {

TEST(ContextTest, ReportsA43CoreContextWithComputeLimits) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  const DeviceInfo& info = ctx.info();
  EXPECT_FALSE(info.renderer.empty());
  GLint major = 0, minor = 0;
  glGetIntegerv(GL_MAJOR_VERSION, &major);
  glGetIntegerv(GL_MINOR_VERSION, &minor);
  EXPECT_GE(major * 10 + minor, 43) << info.version;
  EXPECT_GE(info.limits.max_texture_size, 4096);
  EXPECT_GE(info.limits.max_shared_memory_bytes, 32768);
  EXPECT_GE(info.limits.max_invocations, 1024);
  EXPECT_GE(info.limits.max_storage_block_bytes, int64_t{1} << 24);
  EXPECT_GE(info.limits.max_group_count[0], 65535);
}

TEST(ContextTest, BadShaderReturnsTheInfoLog) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  auto missing = ctx.Program("no_such_shader");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  // The prelude compiles alone with a define that breaks the GLSL: the error carries the log.
  auto broken = ctx.Program("prelude", "#define FMT_UINT 1\nthis is not glsl;\n");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("compiling shader prelude"), std::string::npos)
      << broken.status();
}

TEST(ContextTest, UnknownDeviceIsRefusedByName) {
  auto bad = Context::Create({.device = "gpu-please"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("gpu-please"), std::string::npos);
}

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
        // CPU renderers make it at upload; elsewhere on first use.
        EXPECT_EQ(img->has_packed(), ctx.info().software);
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

}  // namespace
}  // namespace glimpse::gpu

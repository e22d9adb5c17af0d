#include <gtest/gtest.h>

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

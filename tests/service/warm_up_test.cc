// The start-up warm-up: once the server reports SERVING, no call of any analysis, on any format,
// channel count or image shape, builds a GPU program (so none pays for a shader compile); it runs
// with a helper context beside the serving one, as it does by default on llvmpipe.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "server/kernels.h"
#include "tests/gpu_test_env.h"
#include "tests/service/process_util.h"
#include "tests/service/service_test_util.h"

namespace glimpse::testing {
namespace {

using gpu::HostImage;
using gpu::ImageDesc;
using gpu::SampleType;

uint32_t ProgramsBuilt(v1::ImageAnalytics::Stub& stub) {
  grpc::ClientContext ctx;
  v1::ServerInfo info;
  EXPECT_TRUE(stub.GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
  return info.programs_built();
}

template <typename Reader, typename Message>
grpc::Status Drain(Reader& reader, Message& m) {
  while (reader->Read(&m)) {
  }
  return reader->Finish();
}

TEST(WarmUpTest, NoCallBuildsAProgramAfterStartUp) {
  server::ServerOptions options;
  options.worker.warm_up_threads = 2;
  std::unique_ptr<TestServer> ts = TestServer::Start(options, /*warm_up=*/true);
  GLIMPSE_REQUIRE_SERVER(ts);
  v1::ImageAnalytics::Stub& stub = *ts->stub;
  {
    grpc::ClientContext ctx;
    v1::ServerInfo info;
    ASSERT_TRUE(stub.GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
    EXPECT_GT(info.warm_up_ms(), 0u);
    EXPECT_GT(info.programs_built(), 0u);
  }
  const uint32_t built = ProgramsBuilt(stub);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  // Shapes whose sides are and are not powers of two: software renderers compile a variant per
  // power-of-two-ness of the bound textures.
  const std::pair<int, int> shapes[] = {{16, 8}, {37, 23}, {64, 29}, {33, 32}, {1020, 5}, {200, 64}};
  for (SampleType type : {SampleType::kUint8, SampleType::kUint16, SampleType::kFloat32}) {
    for (int channels = 1; channels <= 4; ++channels) {
      for (const auto& [w, h] : shapes) {
        const ImageDesc desc{w, h, channels, type};
        SCOPED_TRACE(gpu::DescribeImage(desc));
        const HostImage img = RandomImage(desc, rng);
        const v1::ImageRef ref = InlineRaw(img);
        for (int bins : {16, 256}) {
          for (auto source : {v1::HISTOGRAM_SOURCE_ALL_CHANNELS, v1::HISTOGRAM_SOURCE_CHANNEL,
                              v1::HISTOGRAM_SOURCE_LUMA, v1::HISTOGRAM_SOURCE_RGB_MEAN}) {
            if (channels < 3 && (source == v1::HISTOGRAM_SOURCE_LUMA ||
                                 source == v1::HISTOGRAM_SOURCE_RGB_MEAN)) {
              continue;
            }
            grpc::ClientContext ctx;
            v1::HistogramRequest req;
            *req.mutable_image() = ref;
            req.mutable_options()->set_bins(uint32_t(bins));
            req.mutable_options()->set_source(source);
            v1::HistogramResponse resp;
            ASSERT_TRUE(stub.Histogram(&ctx, req, &resp).ok());
          }
        }
        for (bool squared : {false, true}) {
          grpc::ClientContext ctx;
          v1::IntegralImageRequest req;
          *req.mutable_image() = ref;
          req.mutable_options()->set_squared(squared);
          auto reader = stub.IntegralImage(&ctx, req);
          v1::IntegralImageResponse m;
          ASSERT_TRUE(Drain(reader, m).ok());
        }
        for (bool count_only : {false, true}) {
          grpc::ClientContext ctx;
          v1::CompactRequest req;
          *req.mutable_image() = ref;
          req.mutable_options()->set_lo(1);
          req.mutable_options()->set_hi(100);
          req.mutable_options()->set_count_only(count_only);
          auto reader = stub.Compact(&ctx, req);
          v1::CompactResponse m;
          ASSERT_TRUE(Drain(reader, m).ok());
        }
        for (uint32_t r : {0u, 1u, 3u, 7u, 20u}) {
          for (auto border : {v1::BORDER_MODE_REPLICATE, v1::BORDER_MODE_REFLECT101,
                              v1::BORDER_MODE_CONSTANT}) {
            grpc::ClientContext ctx;
            v1::BoxFilterRequest req;
            *req.mutable_image() = ref;
            req.mutable_options()->set_rx(r);
            req.mutable_options()->set_ry(uint32_t(rng() % 9));
            req.mutable_options()->set_border(border);
            req.set_encoding(v1::PIXEL_ENCODING_RAW);
            auto reader = stub.BoxFilter(&ctx, req);
            v1::BoxFilterResponse m;
            ASSERT_TRUE(Drain(reader, m).ok());
          }
        }
        EXPECT_EQ(ProgramsBuilt(stub), built);
      }
    }
  }
}

// The default number of warm-up contexts: one where helpers cannot help (a GPU, whose driver is
// not Mesa's; Mesa's disk cache turned off), else the usable CPUs, at most kMaxWarmUpThreads.
TEST(WarmUpTest, AutoThreadsFollowTheDeviceAndMesasCache) {
  ScopedEnv cache("MESA_SHADER_CACHE_DISABLE", nullptr);
  gpu::DeviceInfo gpu_device, cpu_device;
  cpu_device.software = true;
  EXPECT_EQ(server::AutoWarmUpThreads(gpu_device), 1);
  const int cpus = server::AutoWarmUpThreads(cpu_device);
  EXPECT_GE(cpus, 1);
  EXPECT_LE(cpus, server::kMaxWarmUpThreads);
  EXPECT_LE(cpus, int(std::thread::hardware_concurrency()));
  for (const char* off : {"true", "1", "yes", "TRUE"}) {
    cache.Set(off);
    EXPECT_EQ(server::AutoWarmUpThreads(cpu_device), 1) << off;
  }
  for (const char* on : {"false", "0", "no", "F"}) {
    cache.Set(on);
    EXPECT_EQ(server::AutoWarmUpThreads(cpu_device), cpus) << on;
  }
}

}  // namespace
}  // namespace glimpse::testing

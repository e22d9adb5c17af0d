// The start-up warm-up: once the server reports SERVING, no call of any analysis, on any format,
// channel count or image shape, builds a GPU program (so none pays for a shader compile), with the
// variants `auto` picks on this device and with those it picks on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "server/analyses/kernels.h"
#include "server/request_warm_up.h"
#include "tests/gpu_test_env.h"
#include "tests/service/metrics_scrape.h"
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

// Calls every analysis on every format, channel count and shape, with the options that select
// different programs, on a server that has warmed up: every call must find its GL program built.
// (Building is where a GPU's driver compiles. llvmpipe compiles again on a program's first
// dispatch, for each power-of-two-ness of the images bound, which no GL query shows: the warm-up
// dispatches every program on such shapes, and bench/peers.py's cold column times first calls.)
// `ran` gets the names of the variants that ran; `software`, whether the device is a CPU renderer.
void CheckNoCallBuildsAProgram(bool gpu_paths, std::set<std::string>* ran, bool* software) {
  // The per-call metrics are process-wide: a server without a warm-up serves them, so that the
  // warmed server's start can be seen from outside it.
  server::ServerOptions watcher_options;
  watcher_options.metrics_listen = "127.0.0.1:0";
  std::unique_ptr<TestServer> watcher = TestServer::Start(watcher_options);
  GLIMPSE_REQUIRE_SERVER(watcher);
  const Scrape before = Scrape::Fetch(watcher->server->metrics_port());
  server::ServerOptions options;
  options.worker.warm_up_threads = 2;
  options.worker.gpu_paths = gpu_paths;
  std::unique_ptr<TestServer> ts = TestServer::Start(options, /*warm_up=*/true);
  GLIMPSE_REQUIRE_SERVER(ts);
  {
    // The request path's sample calls are no user's: no call counted, none logged; the
    // scheduler's metrics show their jobs under a tenant of their own.
    const Scrape after = Scrape::Fetch(watcher->server->metrics_port());
    for (const char* method : {"Histogram", "IntegralImage", "Compact", "BoxFilter"}) {
      const Labels ok = {{"method", method}, {"code", "OK"}};
      EXPECT_EQ(after.Get("glimpse_calls_total", ok), before.Get("glimpse_calls_total", ok))
          << method;
    }
    const Labels warm_up = {{"tenant", server::kWarmUpClientKey}};
    EXPECT_GE(after.Get("glimpse_tenant_jobs_total", warm_up) -
                  before.Get("glimpse_tenant_jobs_total", warm_up),
              10);
    const Labels unknown = {{"tenant", "unknown"}};
    EXPECT_EQ(after.Get("glimpse_tenant_jobs_total", unknown),
              before.Get("glimpse_tenant_jobs_total", unknown));
  }
  v1::ImageAnalytics::Stub& stub = *ts->stub;
  *software = ServerIsSoftware(stub);
  {
    grpc::ClientContext ctx;
    v1::ServerInfo info;
    ASSERT_TRUE(stub.GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
    EXPECT_GT(info.warm_up_ms(), 0u);
    EXPECT_GT(info.programs_built(), 0u);
    // The request path's warm-up (server/request_warm_up.h) ran its sample calls through the
    // worker: at least one job for each of its 10 calls, before any of this test's.
    EXPECT_GE(info.jobs_run(), 10u);
  }
  {
    // ... and left nothing behind in the store.
    grpc::ClientContext ctx;
    v1::ListImagesResponse list;
    ASSERT_TRUE(stub.ListImages(&ctx, v1::ListImagesRequest(), &list).ok());
    EXPECT_EQ(list.images_size(), 0);
  }
  const uint32_t built = ProgramsBuilt(stub);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  // Shapes whose sides are and are not powers of two (see above).
  const std::pair<int, int> shapes[] = {{16, 8},  {37, 23},  {64, 29},
                                        {33, 32}, {1020, 5}, {200, 64}};
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
            if (channels < 3 &&
                (source == v1::HISTOGRAM_SOURCE_LUMA || source == v1::HISTOGRAM_SOURCE_RGB_MEAN)) {
              continue;
            }
            grpc::ClientContext ctx;
            v1::HistogramRequest req;
            *req.mutable_image() = ref;
            req.mutable_options()->set_bins(uint32_t(bins));
            req.mutable_options()->set_source(source);
            v1::HistogramResponse resp;
            ASSERT_TRUE(stub.Histogram(&ctx, req, &resp).ok());
            ran->insert(resp.variant());
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
          ASSERT_TRUE(m.has_trailer());
          ran->insert(m.trailer().variant());
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
          std::string variant;
          while (reader->Read(&m)) {
            if (m.has_header()) variant = m.header().variant();
          }
          ASSERT_TRUE(reader->Finish().ok());
          ran->insert(variant);
        }
        for (uint32_t r : {0u, 1u, 3u, 7u, 20u}) {
          for (auto border :
               {v1::BORDER_MODE_REPLICATE, v1::BORDER_MODE_REFLECT101, v1::BORDER_MODE_CONSTANT}) {
            grpc::ClientContext ctx;
            v1::BoxFilterRequest req;
            *req.mutable_image() = ref;
            req.mutable_options()->set_rx(r);
            req.mutable_options()->set_ry(uint32_t(rng() % 9));
            req.mutable_options()->set_border(border);
            req.set_encoding(v1::PIXEL_ENCODING_RAW);
            auto reader = stub.BoxFilter(&ctx, req);
            v1::BoxFilterResponse m;
            std::string variant;
            while (reader->Read(&m)) {
              if (m.has_header()) variant = m.header().variant();
            }
            ASSERT_TRUE(reader->Finish().ok());
            ran->insert(variant);
          }
        }
        ASSERT_EQ(ProgramsBuilt(stub), built);
      }
    }
  }
}

// Variants `auto` picks only on CPU renderers, and variants it picks only on GPUs.
const std::set<std::string> kCpuVariants = {"private_array", "private_rows", "packed_strips",
                                            "strip_scan", "fused_strips"};
const std::set<std::string> kGpuVariants = {"shared_per_thread", "work_efficient", "shared_tile"};

bool Intersect(const std::set<std::string>& a, const std::set<std::string>& b) {
  return std::any_of(a.begin(), a.end(), [&](const std::string& x) { return b.contains(x); });
}

TEST(WarmUpTest, NoCallBuildsAProgramAfterStartUp) {
  std::set<std::string> ran;
  bool software = false;
  CheckNoCallBuildsAProgram(/*gpu_paths=*/false, &ran, &software);
  if (::testing::Test::HasFatalFailure() || ::testing::Test::IsSkipped()) return;
  if (software) {
    EXPECT_TRUE(Intersect(ran, kCpuVariants));
    EXPECT_FALSE(Intersect(ran, kGpuVariants));
  }
}

// The same with the variants `auto` picks on a GPU (on llvmpipe: forced), so that a GPU's warm-up
// is checked wherever the tests run.
TEST(WarmUpTest, NoCallBuildsAProgramAfterStartUpWithAGpusChoices) {
  std::set<std::string> ran;
  bool software = false;
  CheckNoCallBuildsAProgram(/*gpu_paths=*/true, &ran, &software);
  if (::testing::Test::HasFatalFailure() || ::testing::Test::IsSkipped()) return;
  EXPECT_FALSE(Intersect(ran, kCpuVariants));
  EXPECT_TRUE(Intersect(ran, kGpuVariants));
}

// The request path's warm-up sends samples whose results a small --result-buffer-bytes refuses:
// the server starts all the same (the refusals are logged), and its calls are answered.
TEST(WarmUpTest, ASampleTheServersLimitsRefuseDoesNotStopTheStart) {
  server::ServerOptions options;
  options.worker.result_buffer_bytes = 1 << 16;  // the flag's least: the samples' box filters
                                                 // and compactions need more
  std::unique_ptr<TestServer> ts = TestServer::Start(options, /*warm_up=*/true);
  GLIMPSE_REQUIRE_SERVER(ts);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  const HostImage img = RandomImage(ImageDesc{37, 23, 3, SampleType::kUint8}, rng);
  grpc::ClientContext ctx;
  v1::HistogramRequest req;
  *req.mutable_image() = InlineRaw(img);
  v1::HistogramResponse resp;
  ASSERT_TRUE(ts->stub->Histogram(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.histograms_size(), 3);
  for (int c = 0; c < 3; ++c) {
    uint64_t total = 0;
    for (uint64_t n : resp.histograms(c).counts()) total += n;
    EXPECT_EQ(total, uint64_t{37} * 23) << "channel " << c;
  }
}

// The default number of warm-up contexts: one where helpers cannot help (a GPU, whose driver is
// not Mesa's; Mesa's disk cache turned off), else the usable CPUs, at most kMaxWarmUpThreads.
// Without the warm-up a server still builds every program a call can need before it serves, so
// that a driver that cannot compile one fails the start rather than a call; an embedder may
// defer each to the call that first needs it (as the other service tests' servers do), and that
// call builds it and answers as the other server does.
TEST(WarmUpTest, WithoutTheWarmUpProgramsAreBuiltAtStartUnlessDeferred) {
  std::unique_ptr<TestServer> eager =
      TestServer::Start({}, /*warm_up=*/false, /*build_programs=*/true);
  GLIMPSE_REQUIRE_SERVER(eager);
  std::unique_ptr<TestServer> deferred =
      TestServer::Start({}, /*warm_up=*/false, /*build_programs=*/false);
  GLIMPSE_REQUIRE_SERVER(deferred);
  const uint32_t at_start = ProgramsBuilt(*eager->stub);
  EXPECT_EQ(ProgramsBuilt(*deferred->stub), 0u);

  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  v1::HistogramRequest req;
  *req.mutable_image() = InlineRaw(RandomImage({67, 45, 3, SampleType::kUint8}, rng));
  v1::HistogramResponse from_eager, from_deferred;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(eager->stub->Histogram(&ctx, req, &from_eager).ok());
  }
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(deferred->stub->Histogram(&ctx, req, &from_deferred).ok());
  }
  from_eager.clear_timing();
  from_deferred.clear_timing();
  EXPECT_EQ(from_deferred.SerializeAsString(), from_eager.SerializeAsString());
  EXPECT_EQ(from_eager.total(), 3u * 67 * 45);
  // The worker counts what a job built once the job is over, which may be just after its answer.
  uint32_t by_the_call = 0;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       by_the_call == 0 && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    by_the_call = ProgramsBuilt(*deferred->stub);
  }
  EXPECT_GT(by_the_call, 0u);
  EXPECT_EQ(ProgramsBuilt(*eager->stub), at_start);  // built at start, the call's among them
  EXPECT_LT(by_the_call, at_start);
}

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

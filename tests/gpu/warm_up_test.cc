// Splitting a warm-up between threads (gpu/warm_up.h), and contexts on one display living on
// several threads at once.
#include "gpu/warm_up.h"

#include <glad/egl.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "gpu/compaction.h"
#include "gpu/context.h"
#include "gpu/histogram.h"
#include "tests/gpu_test_env.h"

namespace glimpse::testing {
namespace {

using gpu::WarmUpShare;

TEST(WarmUpShareTest, AloneClaimsEveryUnit) {
  WarmUpShare all;
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(all.Claim()) << "unit " << i;
  EXPECT_EQ(all.units_seen(), 100);
  EXPECT_EQ(all.units_claimed(), 100);
}

TEST(WarmUpShareTest, ThreadsWalkingTheSameUnitsRunEachExactlyOnce) {
  constexpr int kUnits = 20000;
  for (int threads : {1, 2, 3, 8}) {
    SCOPED_TRACE(threads);
    std::atomic<int> next{0};
    std::vector<std::atomic<int>> runs(kUnits);
    std::vector<int> claimed(static_cast<size_t>(threads));
    {
      std::vector<std::jthread> walkers;
      for (int t = 0; t < threads; ++t) {
        walkers.emplace_back([&, t] {
          WarmUpShare share(&next);
          for (int unit = 0; unit < kUnits; ++unit) {
            if (share.Claim()) runs[static_cast<size_t>(unit)]++;
          }
          EXPECT_EQ(share.units_seen(), kUnits);
          claimed[static_cast<size_t>(t)] = share.units_claimed();
        });
      }
    }
    int total = 0;
    for (int c : claimed) total += c;
    EXPECT_EQ(total, kUnits);
    for (int unit = 0; unit < kUnits; ++unit) {
      ASSERT_EQ(runs[static_cast<size_t>(unit)].load(), 1) << "unit " << unit;
    }
  }
}

// Two threads, each with a context of its own, split a kernel's warm-up; both walk all of its
// units, and each unit is run by one of them. Their contexts end while the shared context (this
// thread's) lives on: its display must stay initialized, and it must still compute.
TEST(WarmUpShareTest, ContextsOnThreadsSplitAKernelsUnitsAndLeaveTheDisplayUp) {
  gpu::Context* shared = SharedContext();
  if (shared == nullptr) GTEST_SKIP() << SharedContextError();
  std::atomic<int> next{0};
  std::vector<int> seen(2, -1), claimed(2, -1);
  {
    std::vector<std::jthread> threads;
    for (size_t t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        absl::StatusOr<std::unique_ptr<gpu::Context>> ctx =
            gpu::Context::Create({.device = "auto", .log_renderer = false});
        ASSERT_TRUE(ctx.ok()) << ctx.status();
        gpu::CompactionKernel kernel(**ctx);
        WarmUpShare share(&next);
        const absl::Status s = kernel.WarmUp(share);
        ASSERT_TRUE(s.ok()) << s;
        seen[t] = share.units_seen();
        claimed[t] = share.units_claimed();
      });
    }
  }
  EXPECT_GT(seen[0], 1);
  EXPECT_EQ(seen[0], seen[1]);
  EXPECT_EQ(claimed[0] + claimed[1], seen[0]);

  const EGLDisplay display = eglGetCurrentDisplay();
  ASSERT_NE(display, EGL_NO_DISPLAY);
  EXPECT_NE(eglQueryString(display, EGL_VERSION), nullptr)
      << "the display was terminated with another thread's context";
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  const gpu::ImageDesc desc{37, 23, 3, gpu::SampleType::kUint8};
  const gpu::HostImage host = RandomImage(desc, rng);
  absl::StatusOr<gpu::Image> image = gpu::Image::Upload(*shared, host);
  ASSERT_TRUE(image.ok()) << image.status();
  gpu::HistogramKernel histogram(*shared);
  gpu::HistogramOptions options;
  options.bins = 16;
  absl::StatusOr<gpu::HistogramResult> r = histogram.Run(*image, options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->counts.size(), size_t{3});
  for (int c = 0; c < 3; ++c) {
    std::vector<uint64_t> want(16);
    for (int y = 0; y < desc.height; ++y) {
      for (int x = 0; x < desc.width; ++x) ++want[host.at<uint8_t>(x, y, c) / 16];
    }
    EXPECT_EQ(r->counts[size_t(c)], want) << "channel " << c;
  }
}

}  // namespace
}  // namespace glimpse::testing

// Test helpers shared by the gpu/ tests: the shared context, seeds, random images.
#ifndef GLIMPSE_TESTS_GPU_TEST_ENV_H_
#define GLIMPSE_TESTS_GPU_TEST_ENV_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "gpu/context.h"
#include "gpu/image.h"

namespace glimpse::testing {

// Every sample type, for tests that run each.
inline constexpr gpu::SampleType kSampleTypes[] = {
    gpu::SampleType::kUint8, gpu::SampleType::kUint16, gpu::SampleType::kFloat32};

// The context made by the test main, or nullptr when none could be opened.
gpu::Context* SharedContext();
const std::string& SharedContextError();
// True when the environment demands a context (GLIMPSE_REQUIRE_GPU_CONTEXT=1).
bool RequireContext();

// A fresh seed per run (GLIMPSE_SEED=N to replay), printed so a failure can be reproduced.
inline uint64_t TestSeed() {
  static const uint64_t seed = [] {
    const char* s = std::getenv("GLIMPSE_SEED");
    uint64_t v = s ? std::strtoull(s, nullptr, 10) : std::random_device{}();
    return v;
  }();
  return seed;
}

// Fills `n` bytes at `p` with random bytes, eight from each draw (byte by byte, test code, which
// the sanitizer builds leave unoptimized, was a large part of some tests' time there).
inline void FillRandomBytes(uint8_t* p, size_t n, std::mt19937_64& rng) {
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(p + i, &v, std::min<size_t>(8, n - i));
  }
}

// Fills every sample uniformly: integers over their full range (or [0, max_value] when given),
// floats in [-1, 2) plus a few exact edge values.
inline gpu::HostImage RandomImage(const gpu::ImageDesc& desc, std::mt19937_64& rng,
                                  double max_value = -1) {
  gpu::HostImage img = gpu::HostImage::Zeros(desc);
  if (desc.type != gpu::SampleType::kFloat32 && max_value < 0) {
    // Every byte uniform over 0-255 is every sample uniform over its full range.
    FillRandomBytes(img.data.data(), img.data.size(), rng);
    return img;
  }
  for (int y = 0; y < desc.height; ++y) {
    for (int x = 0; x < desc.width; ++x) {
      for (int c = 0; c < desc.channels; ++c) {
        switch (desc.type) {
          case gpu::SampleType::kUint8: {
            uint32_t hi = max_value >= 0 ? uint32_t(max_value) : 255u;
            img.set<uint8_t>(x, y, c, uint8_t(std::uniform_int_distribution<uint32_t>(0, hi)(rng)));
            break;
          }
          case gpu::SampleType::kUint16: {
            uint32_t hi = max_value >= 0 ? uint32_t(max_value) : 65535u;
            img.set<uint16_t>(x, y, c,
                              uint16_t(std::uniform_int_distribution<uint32_t>(0, hi)(rng)));
            break;
          }
          case gpu::SampleType::kFloat32: {
            float v = std::uniform_real_distribution<float>(-1.0f, 2.0f)(rng);
            if (rng() % 16 == 0) v = float(rng() % 5) * 0.25f;  // values exactly on bin edges
            img.set<float>(x, y, c, v);
            break;
          }
        }
      }
    }
  }
  return img;
}

// Runs `body` on a context of its own, made with `options` (the device "auto", quiet) on a thread
// of its own: a context belongs to the thread that made it, and the shared one stays current on
// the test's. For paths a GPU takes that options can force on any renderer (plain uploads,
// copied read-backs).
inline void OnOwnContext(gpu::ContextOptions options,
                         const std::function<void(gpu::Context&)>& body) {
  options.log_renderer = false;
  std::thread([&] {
    absl::StatusOr<std::unique_ptr<gpu::Context>> ctx = gpu::Context::Create(options);
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    body(**ctx);
  }).join();
}

// OnOwnContext once per read-back path a GPU takes (gpu/readback.h: copied out by the driver, and
// copied by the device into pinned memory), forced on any renderer.
inline void OnGpuReadPathContexts(const std::function<void(gpu::Context&)>& body) {
  for (gpu::ReadPath path : {gpu::ReadPath::kCopied, gpu::ReadPath::kPinned}) {
    SCOPED_TRACE(::testing::Message() << "read path " << gpu::ReadPathName(path));
    OnOwnContext({.read_path = path}, [&](gpu::Context& ctx) {
      ASSERT_EQ(ctx.limits().read_path, path);
      body(ctx);
    });
  }
}

}  // namespace glimpse::testing

// Skips the test (with the reason) where no EGL context could be opened, fails instead where the
// environment requires one. Defines `ctx` (gpu::Context&).
#define GLIMPSE_REQUIRE_CONTEXT(ctx)                                                \
  if (::glimpse::testing::SharedContext() == nullptr) {                             \
    if (::glimpse::testing::RequireContext()) {                                     \
      FAIL() << "no EGL context: " << ::glimpse::testing::SharedContextError();     \
    }                                                                               \
    GTEST_SKIP() << "no EGL context: " << ::glimpse::testing::SharedContextError(); \
  }                                                                                 \
  ::glimpse::gpu::Context& ctx = *::glimpse::testing::SharedContext()

// GLIMPSE_REQUIRE_CONTEXT for tests that open contexts of their own (OnOwnContext).
#define GLIMPSE_REQUIRE_DEVICE()            \
  GLIMPSE_REQUIRE_CONTEXT(shared_context_); \
  (void)shared_context_

#define GLIMPSE_SEED_TRACE()        \
  SCOPED_TRACE(::testing::Message() \
               << "seed " << ::glimpse::testing::TestSeed() << " (GLIMPSE_SEED to replay)")

#endif  // GLIMPSE_TESTS_GPU_TEST_ENV_H_

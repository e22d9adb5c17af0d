// gpu/ tests share one GL context, made current on the main thread before any test runs.
// Without any EGL context the tests skip with the reason, unless GLIMPSE_REQUIRE_GPU_CONTEXT=1
// (CI sets it), in which case they fail.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <string>

#include "tests/gpu_test_env.h"

namespace glimpse::testing {
namespace {
std::unique_ptr<gpu::Context>* g_context = nullptr;
std::string* g_error = nullptr;
}  // namespace

gpu::Context* SharedContext() { return g_context ? g_context->get() : nullptr; }
const std::string& SharedContextError() { return *g_error; }
bool RequireContext() {
  const char* v = std::getenv("GLIMPSE_REQUIRE_GPU_CONTEXT");
  return v != nullptr && std::string(v) == "1";
}

}  // namespace glimpse::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  spdlog::set_level(spdlog::level::warn);
  std::unique_ptr<glimpse::gpu::Context> context;
  std::string error;
  glimpse::testing::g_context = &context;
  glimpse::testing::g_error = &error;
  // Test discovery only lists the tests: no context needed.
  bool listing = ::testing::GTEST_FLAG(list_tests);
  if (!listing) {
    glimpse::gpu::ContextOptions options;
    if (const char* d = std::getenv("GLIMPSE_DEVICE")) options.device = d;
    // GLIMPSE_TEST_AS_GPU=1: the shared context takes a GPU's paths on any renderer (the variants
    // `auto` picks there, plain uploads, copied read-backs), so that llvmpipe checks them too.
    if (const char* g = std::getenv("GLIMPSE_TEST_AS_GPU"); g != nullptr && std::string(g) == "1") {
      options.auto_as_gpu = options.plain_uploads = true;
      options.read_path = glimpse::gpu::ReadPath::kPinned;
    }
    auto created = glimpse::gpu::Context::Create(options);
    if (created.ok()) {
      context = std::move(*created);
      const auto& info = context->info();
      std::printf("GL context: %s | %s | %s\n", info.vendor.c_str(), info.renderer.c_str(),
                  info.version.c_str());
    } else {
      error = std::string(created.status().message());
      std::printf("No EGL context: %s\n", error.c_str());
    }
  }
  int rc = RUN_ALL_TESTS();
  context.reset();
  return rc;
}

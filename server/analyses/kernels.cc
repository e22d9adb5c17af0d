#include "server/analyses/kernels.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/str.h"
#include "server/analyses/registry.h"
#include "server/analyses/runner.h"
#include "server/rpc/status_util.h"
#include "server/worker/host_pool.h"
#include "spdlog/spdlog.h"

namespace glimpse::server {
namespace {

// One line per analysis of the registry: its name and how its kernel is prepared.
struct AnalysisEntry {
  std::string_view name;
  absl::Status (*prepare)(Kernels& k, gpu::SampleType type);
  absl::Status (*warm_up)(Kernels& k, gpu::WarmUpShare& share);
  std::vector<std::string> (*variants)(const gpu::DeviceInfo& device);
};

template <typename... A>
std::vector<AnalysisEntry> EntriesOf(AnalysisList<A...>) {
  return {AnalysisEntry{
      A::kName, [](Kernels& k, gpu::SampleType t) { return A::Kernel(k).Prepare(t); },
      [](Kernels& k, gpu::WarmUpShare& s) { return A::Kernel(k).WarmUp(s); }, &A::Variants}...};
}

const std::vector<AnalysisEntry>& Entries() {
  static const std::vector<AnalysisEntry> entries = EntriesOf(kAnalyses);
  return entries;
}

absl::Status WarmUpAll(Kernels& kernels, gpu::WarmUpShare& share, bool log) {
  // Last in the table first: llvmpipe keeps a bounded set of compiled variants and culls the least
  // recently used past it, and the box filter's unrolled programs are by far the largest; warmed
  // last, the small and most used programs (histogram, compaction) are the ones that stay. The
  // costliest units come first, too, which keeps helpers claiming units busy to the end.
  for (auto it = Entries().rbegin(); it != Entries().rend(); ++it) {
    const AnalysisEntry& a = *it;
    const size_t built_before = kernels.ctx.programs_built();
    const auto t0 = std::chrono::steady_clock::now();
    if (absl::Status s = a.warm_up(kernels, share); !s.ok()) {
      return Annotate(s, StrCat("warming up the ", a.name, " kernel"));
    }
    if (log) {
      spdlog::info(
          "warm-up: {} in {:.1f} s ({} programs built for it, beyond those built at "
          "start-up)",
          a.name, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
          kernels.ctx.programs_built() - built_before);
    }
  }
  return absl::OkStatus();
}

// Mesa reads MESA_SHADER_CACHE_DISABLE (MESA_GLSL_CACHE_DISABLE in older releases) as a boolean:
// any value but 0, n, no, f or false turns its disk cache off.
bool MesaShaderCacheDisabled() {
  for (const char* name : {"MESA_SHADER_CACHE_DISABLE", "MESA_GLSL_CACHE_DISABLE"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    std::string v(value);
    for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (v != "0" && v != "n" && v != "no" && v != "f" && v != "false") return true;
  }
  return false;
}

}  // namespace

absl::Status Kernels::Prepare() {
  // One batch: a driver that compiles on threads of its own gets every program at once.
  gpu::ProgramBatch batch(ctx);
  for (gpu::SampleType type :
       {gpu::SampleType::kUint8, gpu::SampleType::kUint16, gpu::SampleType::kFloat32}) {
    for (const AnalysisEntry& a : Entries()) {
      if (absl::Status s = a.prepare(*this, type); !s.ok()) {
        return Annotate(
            s, StrCat("preparing the ", a.name, " kernel for ", gpu::SampleTypeName(type)));
      }
    }
  }
  return Annotate(batch.Finish(), "building the kernels' programs");
}

absl::Status Kernels::WarmUp() {
  gpu::WarmUpShare all;
  return WarmUpAll(*this, all, /*log=*/true);
}

absl::Status Kernels::WarmUp(gpu::WarmUpShare& share) {
  return WarmUpAll(*this, share, /*log=*/false);
}

int AutoWarmUpThreads(const gpu::DeviceInfo& device) {
  if (!device.software || MesaShaderCacheDisabled()) return 1;
  return std::min(UsableCpus(), kMaxWarmUpThreads);
}

absl::Status WarmUpSideBySide(Kernels& kernels, gpu::ContextOptions options, int threads) {
  if (threads > 1) {
    options.log_renderer = false;
    std::atomic<int> next_unit{0};
    std::atomic<int> helper_units{0};
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status mine_status;
    gpu::WarmUpShare mine(&next_unit);
    {
      std::vector<std::jthread> helpers;
      for (int i = 1; i < threads; ++i) {
        helpers.emplace_back([&options, &next_unit, &helper_units, i] {
          // Everything GL a helper makes lives and dies on its own thread.
          absl::StatusOr<std::unique_ptr<gpu::Context>> ctx = gpu::Context::Create(options);
          absl::Status s = ctx.status();
          if (s.ok()) {
            Kernels k(**ctx);
            gpu::WarmUpShare share(&next_unit);
            s = k.Prepare();
            if (s.ok()) s = k.WarmUp(share);
            helper_units += share.units_claimed();
          }
          if (!s.ok()) {
            spdlog::warn(
                "warm-up helper {} stopped, its units are built in the serving context: {}", i,
                MessageOf(s));
          }
        });
      }
      mine_status = kernels.WarmUp(mine);
    }  // joins the helpers
    if (!mine_status.ok()) return mine_status;
    spdlog::info(
        "warm-up: {} contexts side by side in {:.1f} s ({} units here, {} in helpers); "
        "the driver's shader cache brings the helpers' code to this context",
        threads, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
        mine.units_claimed(), helper_units.load());
  }
  return kernels.WarmUp();
}

std::vector<std::string> Kernels::Available() { return kAnalyses.Names(); }

std::vector<std::string> Kernels::Variants(std::string_view analysis,
                                           const gpu::DeviceInfo& device) {
  for (const AnalysisEntry& a : Entries()) {
    if (a.name == analysis) return a.variants(device);
  }
  return {};
}

}  // namespace glimpse::server

// GpuTimer: GL_TIME_ELAPSED queries, or the CPU clock around glFinish where the driver's queries
// do not cover shader execution (llvmpipe).
#include <atomic>
#include <chrono>
#include <cstdint>

#include "gpu/context.h"

namespace glimpse::gpu {

namespace {
std::atomic<bool> g_wall_clock_timing{false};
int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void GpuTimer::UseWallClock(bool wall_clock) { g_wall_clock_timing = wall_clock; }

GpuTimer::GpuTimer() : running_(true) {
  if (g_wall_clock_timing) {
    glFinish();  // earlier work is not ours to count
    start_ns_ = NowNs();
  } else {
    query_ = GlQuery::Create();
    glBeginQuery(GL_TIME_ELAPSED, query_.get());
  }
}

GpuTimer::~GpuTimer() {
  if (running_ && query_) glEndQuery(GL_TIME_ELAPSED);
}

uint64_t GpuTimer::StopAndRead() {
  if (!running_) return result_ns_;
  running_ = false;
  if (!query_) {
    glFinish();
    result_ns_ = uint64_t(NowNs() - start_ns_);
  } else {
    glEndQuery(GL_TIME_ELAPSED);
    GLuint64 ns = 0;
    glGetQueryObjectui64v(query_.get(), GL_QUERY_RESULT, &ns);
    result_ns_ = ns;
  }
  return result_ns_;
}

}  // namespace glimpse::gpu

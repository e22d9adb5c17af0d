// The EGL side of a Context: loading EGL and GL entry points once per process, picking and
// initializing the display (a GPU device, else Mesa's surfaceless platform), counting each
// display's users so that only the last context terminates it, and pinning a CPU renderer's
// threads. Used by gpu/context.cc only.
//
//   absl::StatusOr<EGLDisplay> display = OpenDisplay(options, &info);
//   if (!DisplayUsers::Initialize(*display, &major, &minor)) return EglFailure("eglInitialize");
#ifndef GLIMPSE_GPU_INTERNAL_EGL_DISPLAY_H_
#define GLIMPSE_GPU_INTERNAL_EGL_DISPLAY_H_

#include <glad/egl.h>
#include <spdlog/spdlog.h>

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/str.h"
#include "gpu/context.h"
#include "gpu/internal/driver_threads.h"

namespace glimpse::gpu {

std::string EglErrorName(EGLint e);
// UNAVAILABLE: "`what` failed: EGL_BAD_...", from eglGetError().
absl::Status EglFailure(std::string_view what);
// Whether the space-separated extension `list` (may be null) names `ext` exactly.
bool HasExtension(const char* list, std::string_view ext);

// Picks the EGL display per options.device; fills info->platform. Loads EGL's client entry
// points first (once per process).
absl::StatusOr<EGLDisplay> OpenDisplay(const ContextOptions& options, DeviceInfo* info);
// glad's EGL entry points of an initialized display, and the GL 4.3 ones of the current context,
// loaded once per process (libglvnd's entry points dispatch on the calling thread's context).
// Each returns glad's version, 0 if loading failed (the next call retries).
int LoadEglDisplayOnce(EGLDisplay display);
int LoadGlOnce();

// EGL displays are per process: eglGetPlatformDisplay returns the same one for every context on a
// device, and eglTerminate ends it for all of them. Contexts count their display's users here
// (under the mutex, with the eglInitialize or eglTerminate) so only the last one terminates it.
// A CPU renderer starts its worker threads while the display's first context is made: that
// context finds and pins them once it shows the renderer is a CPU one.
class DisplayUsers {
 public:
  static EGLBoolean Initialize(EGLDisplay display, EGLint* major, EGLint* minor) {
    std::lock_guard lock(mu_);
    if (!eglInitialize(display, major, minor)) return EGL_FALSE;
    ++users_[display].users;
    return EGL_TRUE;
  }
  static void Terminate(EGLDisplay display) {
    std::lock_guard lock(mu_);
    auto it = users_.find(display);
    if (it == users_.end() || --it->second.users > 0) return;
    users_.erase(it);
    eglTerminate(display);
  }
  // The first time it is asked for a display: finds the driver threads `capture` saw start (the
  // display's first context was made within it) and pins them one per CPU, logged at `level`.
  // Returns those pinned.
  static std::vector<PinnedThread> PinDriverThreads(EGLDisplay display,
                                                    const DriverThreadCapture& capture,
                                                    spdlog::level::level_enum level) {
    std::lock_guard lock(mu_);
    auto it = users_.find(display);
    if (it == users_.end()) return {};
    Display& d = it->second;
    if (!d.pin_tried) {
      d.pin_tried = true;
      const std::vector<pid_t> threads = capture.Started();
      d.pinned = PinOnePerCpu(threads);
      std::string where;
      for (const PinnedThread& t : d.pinned) {
        StrAppend(&where, where.empty() ? "" : ", ", "thread ", t.tid, " on CPU ", t.cpu);
      }
      spdlog::log(level, "CPU renderer: {} worker threads, {}", threads.size(),
                  where.empty() ? "left to the scheduler (fewer than this process's CPUs, or one "
                                  "CPU)"
                                : "pinned one per CPU: " + where);
    }
    return d.pinned;
  }

 private:
  struct Display {
    int users = 0;
    bool pin_tried = false;
    std::vector<PinnedThread> pinned;
  };
  static inline std::mutex mu_;
  static inline std::map<EGLDisplay, Display> users_;
};

}  // namespace glimpse::gpu

#endif  // GLIMPSE_GPU_INTERNAL_EGL_DISPLAY_H_

// The headless OpenGL 4.3 core context that every kernel runs in, and what it reports.
//
//   absl::StatusOr<std::unique_ptr<Context>> ctx = Context::Create({.device = "software"});
//   if (!ctx.ok()) return ctx.status();
//   absl::StatusOr<GLuint> program = (*ctx)->Program("histogram_global_atomics", defines);
//   if (!program.ok()) return program.status();  // carries the GLSL info log
//   glUseProgram(*program);
//   GpuTimer timer;
//   glDispatchCompute(groups_x, groups_y, 1);
//   const uint64_t gpu_ns = timer.StopAndRead();
#ifndef GLIMPSE_GPU_CONTEXT_H_
#define GLIMPSE_GPU_CONTEXT_H_

#include <glad/gl.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpu/gl_handles.h"
#include "gpu/internal/driver_threads.h"
#include "gpu/readback.h"
#include "gpu/staging.h"
#include "gpu/texture_pool.h"

namespace glimpse::gpu {

struct ContextOptions {
  // "auto": the first hardware EGL device, else Mesa's software renderer (llvmpipe);
  // "software": Mesa's surfaceless platform (llvmpipe); "0", "1", ...: that EGL device.
  std::string device = "auto";
  // Routes GL debug messages (errors, performance warnings) to the log.
  bool debug_output = true;
  // Logs the renderer at info level (else debug), as the serving context does.
  bool log_renderer = true;
  // On CPU renderers, pins the renderer's worker threads one per CPU of the process's affinity
  // mask (gpu/internal/driver_threads.h): unpinned, the scheduler at times runs two of them on one
  // CPU for whole runs of calls, at half speed. Decided by the display's first context; once
  // pinned, they stay so while the display lives.
  bool pin_driver_threads = true;
  // For tests: `auto` picks, and so the kernels' warm-ups build, the variants it picks on a GPU,
  // even on a CPU renderer (DeviceInfo::cpu_variants), so that llvmpipe can check a GPU's choices.
  // Everything else (timing, packed image forms, thread pinning) stays as the device needs.
  bool auto_as_gpu = false;
  // For tests: uploads fill the plain texture (DeviceLimits::plain_uploads) even on a CPU
  // renderer, as on a GPU, so that llvmpipe runs that path too.
  bool plain_uploads = false;
  // How results come back from device buffers (gpu/readback.h); unset: the device's own
  // (DeviceLimits::read_path). Set for tests, so that llvmpipe runs a GPU's paths too, and for
  // benchmarks comparing them.
  std::optional<ReadPath> read_path = std::nullopt;
  // Storage of freed images' textures kept for the next image of the same shape
  // (gpu/texture_pool.h): enough for a few 4K RGB photos, so that images uploaded with each call
  // reuse mapped memory. 0 keeps none.
  size_t texture_pool_bytes = size_t{128} << 20;
  // The most staging memory host threads decode into and uploads read as it is (gpu/staging.h),
  // mapped as large images arrive: 0 makes none (uploads then read ordinary host memory). Where
  // the driver lacks GL_ARB_buffer_storage the context has none and says so in the log.
  size_t staging_bytes = 0;
};

struct DeviceLimits {
  int max_texture_size = 0;             // widest and tallest image the device takes
  int64_t max_storage_block_bytes = 0;  // GL_MAX_SHADER_STORAGE_BLOCK_SIZE: one SSBO binding
  int max_shared_memory_bytes = 0;      // GL_MAX_COMPUTE_SHARED_MEMORY_SIZE
  int max_invocations = 0;              // GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS
  std::array<int, 3> max_group_count{};
  std::array<int, 3> max_group_size{};
  int storage_buffer_offset_alignment = 0;
  bool int64 = false;  // GL_ARB_gpu_shader_int64
  // GL_ARB_shader_ballot with 64-bit integers (ballotARB returns a uint64_t): subgroup ballots,
  // which Mesa 22's llvmpipe offers (8 invocations per subgroup) as NVIDIA's driver does (warps
  // of 32); Mesa 22's GL has no subgroup shuffles (GL_KHR_shader_subgroup). Shaders see
  // HAVE_BALLOT.
  bool subgroup_ballot = false;
  // GL_KHR_shader_subgroup where compute shaders have it: invocations per subgroup (0 without
  // it) and its GL_SUBGROUP_FEATURE_*_BIT_KHR operations (SubgroupFeatureNames). Recorded, not
  // yet used by any shader: what a device offers beyond ballots (shuffles, arithmetic).
  int subgroup_size = 0;
  uint32_t subgroup_features = 0;
  bool thread_shuffle = false;  // GL_NV_shader_thread_shuffle
  // Whether an upload fills the image's plain texture (GPU renderers), into which a 3-channel
  // image's rows go widened to four channels (WidenForUpload, gpu/image.h); CPU renderers upload
  // only the packed form.
  bool plain_uploads = false;
  // How results come back from device buffers (gpu/readback.h): through a mapping on CPU
  // renderers (their buffers are host memory, read in place); on GPUs copied by the device into
  // pinned host memory (the driver's copy ran at about 3 GB/s and reads through a mapping of
  // device memory at 0.7-3.7 GB/s on an H100, where uploads ran at 10-22 GB/s:
  // bench/results/nvidia_h100.md), or copied out by the driver where pinned memory cannot be
  // made (no GL_ARB_buffer_storage).
  ReadPath read_path = ReadPath::kCopied;
};

// The names of GL_KHR_shader_subgroup's feature bits set in `features` ("basic", "vote",
// "arithmetic", "ballot", "shuffle", "shuffle_relative", "clustered", "quad", and NVIDIA's
// "partitioned_nv"), in bit order.
std::vector<std::string_view> SubgroupFeatureNames(uint32_t features);
// One line on the device's subgroup operations, for logs and benchmark reports: "ballots yes;
// GL_KHR_shader_subgroup 32 invocations (basic, vote, ...); NV thread shuffle no".
std::string DescribeSubgroups(const DeviceLimits& limits);

struct DeviceInfo {
  std::string platform;  // "device N" or "surfaceless"
  std::string egl_vendor, egl_version;
  std::string vendor, renderer, version, glsl_version;
  bool software = false;  // llvmpipe/softpipe: a CPU renderer
  // Whether `auto` picks the variants made for CPU renderers: `software`, unless
  // ContextOptions::auto_as_gpu. Every variant resolver and warm-up asks this, not `software`.
  bool cpu_variants = false;
  DeviceLimits limits;
};

// One EGL display + GL context, current on the thread that created it. Contexts on the same
// display may live on several threads at once: the display is terminated with the last of them.
// REQUIRES: every method, and the destructor, run on the creating thread.
class Context {
 public:
  static absl::StatusOr<std::unique_ptr<Context>> Create(const ContextOptions& options = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceInfo& info() const { return info_; }
  const DeviceLimits& limits() const { return info_.limits; }
  // The CPU renderer's worker threads and the CPU each is pinned to (ContextOptions::
  // pin_driver_threads); empty on GPUs, with one CPU, or when pinning is off.
  const std::vector<PinnedThread>& pinned_threads() const { return pinned_threads_; }

  // The program built from gpu/shaders/<name>.comp with `defines` ("#define X 1\n" lines) and the
  // shared prelude prepended; compiled once, then cached. Errors carry the GLSL info log.
  // A line `#include "x.glsl"` in a shader pulls in gpu/shaders/x.glsl (one level deep). In the
  // info log, file 1 is the prelude, 2 the shader, 1002 a file it included.
  // Inside a ProgramBatch, a new program's id comes back before the driver has compiled it, and
  // its errors come from ProgramBatch::Finish().
  absl::StatusOr<GLuint> Program(std::string_view name, std::string_view defines = {});
  // How many distinct programs have been built so far. A kernel's WarmUp() builds and dispatches
  // every program its auto variant can pick, so after it this number stays put (tests check it).
  size_t programs_built() const { return programs_.size(); }

  // Freed images' textures, for the next image of the same shape (gpu/image.cc).
  TexturePool& textures() { return textures_; }
  // The staging memory (ContextOptions::staging_bytes), or null.
  StagingBuffer* staging() { return staging_.get(); }
  // Read-backs of results, by DeviceLimits::read_path.
  Readback& readback() { return *readback_; }

  // Waits until the GPU has finished all work submitted so far.
  void Finish() const { glFinish(); }

  // A GL error raised since the last check, as a status (INTERNAL), else OK.
  absl::Status CheckGlError(std::string_view where) const;
  // Why mapping `what` (a buffer's bytes) failed: the GL error raised, else INTERNAL.
  absl::Status MapError(std::string_view what) const;

 private:
  friend class ProgramBatch;
  // A program handed to the driver inside a ProgramBatch, its compile and link not yet checked.
  struct PendingProgram {
    std::string key;  // in programs_
    std::string name, defines;
    GlShader shader;
  };
  // Whether `shader` compiled and `program` linked (waiting for the driver); the error names the
  // shader and carries the GLSL info log.
  static absl::Status CheckBuilt(std::string_view name, std::string_view defines, GLuint shader,
                                 GLuint program);
  // Checks every pending program, forgets those that failed; the first failure.
  absl::Status FinishPending();

  explicit Context(size_t texture_pool_bytes) : textures_(texture_pool_bytes) {}
  DeviceInfo info_;
  void* display_ = nullptr;  // EGLDisplay
  void* context_ = nullptr;  // EGLContext
  std::vector<PinnedThread> pinned_threads_;
  std::map<std::string, GlProgram, std::less<>> programs_;
  int batches_ = 0;  // ProgramBatches open
  std::vector<PendingProgram> pending_;
  TexturePool textures_;
  std::unique_ptr<StagingBuffer> staging_;
  std::unique_ptr<Readback> readback_;
};

// Builds the programs asked of Context::Program() while it is open side by side, where the driver
// compiles on threads of its own (GL_KHR_parallel_shader_compile, which Context::Create asks to
// use every thread the driver will): each Program() call hands its program to the driver and
// returns, and Finish() waits for them all. Where the driver compiles in the calling thread
// (Mesa's llvmpipe) the time is the same as without a batch. No program built inside a batch may
// be used before Finish(). REQUIRES: the context's thread; batches may nest (the outermost
// Finish() checks).
class ProgramBatch {
 public:
  explicit ProgramBatch(Context& ctx) : ctx_(ctx) { ++ctx_.batches_; }
  ~ProgramBatch() { (void)Finish(); }
  ProgramBatch(const ProgramBatch&) = delete;
  ProgramBatch& operator=(const ProgramBatch&) = delete;
  // Waits for every program of the batch: the first that failed to compile or link, as
  // Context::Program() words it (the failed ones are forgotten, so asking again fails again).
  absl::Status Finish() {
    if (open_) {
      open_ = false;
      if (--ctx_.batches_ == 0) return ctx_.FinishPending();
    }
    return absl::OkStatus();
  }

 private:
  Context& ctx_;
  bool open_ = true;
};

// Measures GPU time of the commands issued between construction and StopAndRead() with a
// GL_TIME_ELAPSED query. Not nestable (GL allows one active elapsed-time query). On CPU renderers
// (llvmpipe) the query does not cover shader execution, so there it times wall-clock from
// construction to the end of glFinish() instead; Context::Create sets which.
class GpuTimer {
 public:
  GpuTimer();
  ~GpuTimer();
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;
  // Ends the measurement (idempotent) and returns the elapsed nanoseconds; waits for the GPU.
  uint64_t StopAndRead();

  // Process-wide: time with glFinish + the CPU clock instead of timer queries.
  static void UseWallClock(bool wall_clock);

 private:
  GlQuery query_;
  bool running_ = false;
  int64_t start_ns_ = 0;
  uint64_t result_ns_ = 0;
};

// ceil(a / b) for positive values.
constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace glimpse::gpu

#endif  // GLIMPSE_GPU_CONTEXT_H_

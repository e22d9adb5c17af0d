#include "gpu/context.h"

#include <glad/egl.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/str.h"
#include "gpu/internal/driver_threads.h"
#include "gpu/internal/egl_display.h"

namespace glimpse::gpu {
namespace {

void GLAD_API_PTR DebugCallback(GLenum /*source*/, GLenum type, GLuint id, GLenum severity,
                                GLsizei /*length*/, const GLchar* message, const void* /*user*/) {
  if (severity == GL_DEBUG_SEVERITY_NOTIFICATION) {
    spdlog::trace("GL: {}", message);
  } else if (type == GL_DEBUG_TYPE_ERROR) {
    spdlog::error("GL error {}: {}", id, message);
  } else {
    spdlog::debug("GL {}: {}", id, message);
  }
}

std::string GlString(GLenum name) {
  const GLubyte* s = glGetString(name);
  return s ? reinterpret_cast<const char*>(s) : "";
}

DeviceLimits QueryLimits() {
  DeviceLimits l;
  glGetIntegerv(GL_MAX_TEXTURE_SIZE, &l.max_texture_size);
  GLint64 block = 0;
  glGetInteger64v(GL_MAX_SHADER_STORAGE_BLOCK_SIZE, &block);
  l.max_storage_block_bytes = block;
  glGetIntegerv(GL_MAX_COMPUTE_SHARED_MEMORY_SIZE, &l.max_shared_memory_bytes);
  glGetIntegerv(GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS, &l.max_invocations);
  for (GLuint i = 0; i < 3; ++i) {
    glGetIntegeri_v(GL_MAX_COMPUTE_WORK_GROUP_COUNT, i, &l.max_group_count[i]);
    glGetIntegeri_v(GL_MAX_COMPUTE_WORK_GROUP_SIZE, i, &l.max_group_size[i]);
  }
  glGetIntegerv(GL_SHADER_STORAGE_BUFFER_OFFSET_ALIGNMENT, &l.storage_buffer_offset_alignment);
  l.int64 = GLAD_GL_ARB_gpu_shader_int64 != 0;
  l.subgroup_ballot = l.int64 && GLAD_GL_ARB_shader_ballot != 0;
  if (GLAD_GL_KHR_shader_subgroup) {
    GLint stages = 0, size = 0, features = 0;
    glGetIntegerv(GL_SUBGROUP_SUPPORTED_STAGES_KHR, &stages);
    glGetIntegerv(GL_SUBGROUP_SIZE_KHR, &size);
    glGetIntegerv(GL_SUBGROUP_SUPPORTED_FEATURES_KHR, &features);
    if ((GLuint(stages) & GL_COMPUTE_SHADER_BIT) != 0) {
      l.subgroup_size = size;
      l.subgroup_features = uint32_t(features);
    }
  }
  l.thread_shuffle = GLAD_GL_NV_shader_thread_shuffle != 0;
  return l;
}

}  // namespace

std::vector<std::string_view> SubgroupFeatureNames(uint32_t features) {
  constexpr std::string_view kNames[] = {
      "basic",     "vote", "arithmetic",    "ballot", "shuffle", "shuffle_relative",
      "clustered", "quad", "partitioned_nv"};  // GL_SUBGROUP_FEATURE_*_BIT_KHR, bit 0 up
  std::vector<std::string_view> names;
  for (size_t i = 0; i < std::size(kNames); ++i) {
    if ((features >> i) & 1u) names.push_back(kNames[i]);
  }
  return names;
}

std::string DescribeSubgroups(const DeviceLimits& l) {
  std::string features;
  for (std::string_view f : SubgroupFeatureNames(l.subgroup_features)) {
    StrAppend(&features, features.empty() ? "" : ", ", f);
  }
  return StrCat("ballots ", l.subgroup_ballot ? "yes" : "no", "; GL_KHR_shader_subgroup ",
                l.subgroup_size > 0 ? StrCat(l.subgroup_size, " invocations (", features, ")")
                                    : std::string("no"),
                "; NV thread shuffle ", l.thread_shuffle ? "yes" : "no");
}

absl::StatusOr<std::unique_ptr<Context>> Context::Create(const ContextOptions& options) {
  std::unique_ptr<Context> ctx(new Context(options.texture_pool_bytes));
  DeviceInfo& info = ctx->info_;
  // The driver starts its threads somewhere between opening the display and the first context
  // made current (llvmpipe: in eglCreateContext or eglMakeCurrent).
  std::optional<DriverThreadCapture> capture(std::in_place);
  absl::StatusOr<EGLDisplay> display = OpenDisplay(options, &info);
  if (!display.ok()) return display.status();
  if (*display == EGL_NO_DISPLAY)
    return EglFailure(StrCat("eglGetPlatformDisplay(", info.platform, ")"));
  EGLint major = 0, minor = 0;
  if (!DisplayUsers::Initialize(*display, &major, &minor)) return EglFailure("eglInitialize");
  ctx->display_ = *display;
  if (LoadEglDisplayOnce(*display) == 0) {
    return absl::UnavailableError("glad could not load EGL");
  }
  info.egl_vendor = eglQueryString(*display, EGL_VENDOR);
  info.egl_version = eglQueryString(*display, EGL_VERSION);
  const char* display_ext = eglQueryString(*display, EGL_EXTENSIONS);
  if (!HasExtension(display_ext, "EGL_KHR_surfaceless_context") ||
      !HasExtension(display_ext, "EGL_KHR_no_config_context")) {
    return absl::UnavailableError(
        StrCat("EGL display (", info.platform, ", ", info.egl_vendor,
               ") lacks EGL_KHR_surfaceless_context or EGL_KHR_no_config_context"));
  }
  if (!eglBindAPI(EGL_OPENGL_API)) return EglFailure("eglBindAPI(EGL_OPENGL_API)");
  const EGLint attribs[] = {EGL_CONTEXT_MAJOR_VERSION,
                            4,
                            EGL_CONTEXT_MINOR_VERSION,
                            3,
                            EGL_CONTEXT_OPENGL_PROFILE_MASK,
                            EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
                            EGL_CONTEXT_OPENGL_DEBUG,
                            options.debug_output ? EGL_TRUE : EGL_FALSE,
                            EGL_NONE};
  EGLContext context = eglCreateContext(*display, EGL_NO_CONFIG_KHR, EGL_NO_CONTEXT, attribs);
  if (context == EGL_NO_CONTEXT) return EglFailure("eglCreateContext (OpenGL 4.3 core)");
  ctx->context_ = context;
  if (!eglMakeCurrent(*display, EGL_NO_SURFACE, EGL_NO_SURFACE, context)) {
    return EglFailure("eglMakeCurrent");
  }
  if (LoadGlOnce() == 0) {
    return absl::UnavailableError("glad could not load OpenGL 4.3 entry points");
  }
  info.vendor = GlString(GL_VENDOR);
  info.renderer = GlString(GL_RENDERER);
  info.version = GlString(GL_VERSION);
  info.glsl_version = GlString(GL_SHADING_LANGUAGE_VERSION);
  info.software = info.renderer.find("llvmpipe") != std::string::npos ||
                  info.renderer.find("softpipe") != std::string::npos;
  info.cpu_variants = info.software && !options.auto_as_gpu;
  info.limits = QueryLimits();
  info.limits.plain_uploads = !info.software || options.plain_uploads;
  info.limits.read_path =
      options.read_path.value_or(info.software                ? ReadPath::kMapped
                                 : GLAD_GL_ARB_buffer_storage ? ReadPath::kPinned
                                                              : ReadPath::kCopied);
  if (info.limits.read_path == ReadPath::kPinned && !GLAD_GL_ARB_buffer_storage) {
    return absl::FailedPreconditionError(
        "read_path pinned needs GL_ARB_buffer_storage, which this driver lacks");
  }
  // Where the driver can compile programs on threads of its own, let it use all it has
  // (ProgramBatch hands it many at once).
  if (GLAD_GL_KHR_parallel_shader_compile) glMaxShaderCompilerThreadsKHR(0xFFFFFFFFu);
  // llvmpipe's timer queries do not cover shader execution: time with the CPU clock there.
  GpuTimer::UseWallClock(info.software);
  if (options.debug_output && GLAD_GL_KHR_debug) {
    glEnable(GL_DEBUG_OUTPUT);
    glDebugMessageCallback(DebugCallback, nullptr);
  }
  // Pixel rows of any width are tightly packed.
  glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  ctx->readback_ = std::make_unique<Readback>(info.limits.read_path);
  if (options.staging_bytes > 0) {
    absl::StatusOr<std::unique_ptr<StagingBuffer>> staging =
        StagingBuffer::Create(options.staging_bytes);
    if (staging.ok()) {
      ctx->staging_ = *std::move(staging);
    } else {
      spdlog::warn("no staging memory, uploads read ordinary host memory: {}",
                   std::string(staging.status().message()));
    }
  }
  spdlog::log(options.log_renderer ? spdlog::level::info : spdlog::level::debug,
              "GL context: {} | {} | {} (EGL {} {}, {}); results read back {}", info.vendor,
              info.renderer, info.version, info.egl_vendor, info.egl_version, info.platform,
              ReadPathName(info.limits.read_path));
  if (info.software && options.pin_driver_threads) {
    ctx->pinned_threads_ = DisplayUsers::PinDriverThreads(
        *display, *capture, options.log_renderer ? spdlog::level::info : spdlog::level::debug);
  }
  capture.reset();  // the calling thread gets its name back
  return ctx;
}

Context::~Context() {
  staging_.reset();
  readback_.reset();
  textures_.Clear();
  pending_.clear();  // (a ProgramBatch finishes before its context goes; this is a backstop)
  programs_.clear();
  if (display_ != nullptr) {
    eglMakeCurrent(display_, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    if (context_ != nullptr) eglDestroyContext(display_, context_);
    DisplayUsers::Terminate(display_);
  }
}

absl::Status Context::CheckGlError(std::string_view where) const {
  GLenum e = glGetError();
  if (e == GL_NO_ERROR) return absl::OkStatus();
  while (glGetError() != GL_NO_ERROR) {
  }
  if (e == GL_OUT_OF_MEMORY) {
    return absl::ResourceExhaustedError(StrCat(where, ": the GPU is out of memory"));
  }
  return absl::InternalError(StrCat(where, ": GL error 0x", fmt::format("{:x}", e)));
}

absl::Status Context::MapError(std::string_view what) const {
  const std::string where = StrCat("mapping ", what, " for reading");
  absl::Status gl = CheckGlError(where);
  return gl.ok() ? absl::InternalError(StrCat(where, ": the driver could not map it")) : gl;
}

}  // namespace glimpse::gpu

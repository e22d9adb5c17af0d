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
#include "gpu/driver_threads.h"
#include "gpu/embedded_shaders.h"
#include "gpu/str.h"

namespace glimpse::gpu {
namespace {

std::string EglErrorName(EGLint e) {
  switch (e) {
    case EGL_SUCCESS: return "EGL_SUCCESS";
    case EGL_NOT_INITIALIZED: return "EGL_NOT_INITIALIZED";
    case EGL_BAD_ACCESS: return "EGL_BAD_ACCESS";
    case EGL_BAD_ALLOC: return "EGL_BAD_ALLOC";
    case EGL_BAD_ATTRIBUTE: return "EGL_BAD_ATTRIBUTE";
    case EGL_BAD_CONFIG: return "EGL_BAD_CONFIG";
    case EGL_BAD_CONTEXT: return "EGL_BAD_CONTEXT";
    case EGL_BAD_DISPLAY: return "EGL_BAD_DISPLAY";
    case EGL_BAD_MATCH: return "EGL_BAD_MATCH";
    case EGL_BAD_PARAMETER: return "EGL_BAD_PARAMETER";
    default: return StrCat("EGL error 0x", fmt::format("{:x}", e));
  }
}

absl::Status EglFailure(std::string_view what) {
  return absl::UnavailableError(StrCat(what, " failed: ", EglErrorName(eglGetError())));
}

bool HasExtension(const char* list, std::string_view ext) {
  if (list == nullptr) return false;
  std::string_view all(list);
  size_t pos = 0;
  while ((pos = all.find(ext, pos)) != std::string_view::npos) {
    const size_t end = pos + ext.size();
    if ((pos == 0 || all[pos - 1] == ' ') && (end == all.size() || all[end] == ' ')) return true;
    pos = end;
  }
  return false;
}

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

struct EglDevices {
  PFNEGLQUERYDEVICESEXTPROC query_devices = nullptr;
  PFNEGLQUERYDEVICESTRINGEXTPROC query_device_string = nullptr;
  PFNEGLGETPLATFORMDISPLAYEXTPROC get_platform_display = nullptr;
};

// glad keeps the entry points (and extension flags) in process-wide variables. Loading them again
// for a second context, as two servers in one process do, rewrote them while the first context's
// thread was calling through them: a data race. libglvnd's EGL and GL entry points are dispatch
// stubs that route each call to the calling thread's current context, so the first successful
// load serves every later context. Returns glad's version (0: failed; the next call retries).
template <typename Load>
int LoadOnce(int* loaded, Load load) {
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (*loaded == 0) *loaded = load();
  return *loaded;
}
int g_egl_client_loaded = 0, g_egl_display_loaded = 0, g_gl_loaded = 0;

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

// Picks the EGL display per options.device; fills info->platform.
absl::StatusOr<EGLDisplay> OpenDisplay(const ContextOptions& options, DeviceInfo* info) {
  // Before a display exists glad only has EGL 1.0: fetch the extension entry points by hand.
  if (LoadOnce(&g_egl_client_loaded, [] { return gladLoaderLoadEGL(EGL_NO_DISPLAY); }) == 0) {
    return absl::UnavailableError("cannot load libEGL (install libegl1 and a driver: Mesa or NVIDIA)");
  }
  const char* client_ext = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
  EglDevices fn;
  fn.get_platform_display = reinterpret_cast<PFNEGLGETPLATFORMDISPLAYEXTPROC>(
      eglGetProcAddress("eglGetPlatformDisplayEXT"));
  if (HasExtension(client_ext, "EGL_EXT_device_enumeration")) {
    fn.query_devices =
        reinterpret_cast<PFNEGLQUERYDEVICESEXTPROC>(eglGetProcAddress("eglQueryDevicesEXT"));
    fn.query_device_string = reinterpret_cast<PFNEGLQUERYDEVICESTRINGEXTPROC>(
        eglGetProcAddress("eglQueryDeviceStringEXT"));
  }
  if (fn.get_platform_display == nullptr) {
    return absl::UnavailableError("EGL lacks eglGetPlatformDisplayEXT (EGL_EXT_platform_base)");
  }

  std::vector<EGLDeviceEXT> devices;
  if (fn.query_devices != nullptr && HasExtension(client_ext, "EGL_EXT_platform_device")) {
    EGLint n = 0;
    if (fn.query_devices(0, nullptr, &n) && n > 0) {
      devices.resize(static_cast<size_t>(n));
      fn.query_devices(n, devices.data(), &n);
      devices.resize(static_cast<size_t>(n));
    }
  }
  auto is_software = [&](EGLDeviceEXT d) {
    const char* ext = fn.query_device_string ? fn.query_device_string(d, EGL_EXTENSIONS) : nullptr;
    return HasExtension(ext, "EGL_MESA_device_software");
  };
  auto open_device = [&](size_t i) -> EGLDisplay {
    info->platform = StrCat("device ", i);
    return fn.get_platform_display(EGL_PLATFORM_DEVICE_EXT, devices[i], nullptr);
  };
  auto open_surfaceless = [&]() -> absl::StatusOr<EGLDisplay> {
    if (!HasExtension(client_ext, "EGL_MESA_platform_surfaceless")) {
      return absl::UnavailableError(
          "no EGL device and no EGL_MESA_platform_surfaceless: install Mesa (libegl-mesa0 "
          "libgl1-mesa-dri) or the NVIDIA driver");
    }
    info->platform = "surfaceless";
    return fn.get_platform_display(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
  };

  const std::string& want = options.device;
  if (want == "software") return open_surfaceless();
  if (want == "auto") {
    for (size_t i = 0; i < devices.size(); ++i) {
      if (!is_software(devices[i])) return open_device(i);
    }
    return open_surfaceless();
  }
  size_t index = 0;
  auto [ptr, ec] = std::from_chars(want.data(), want.data() + want.size(), index);
  if (ec != std::errc() || ptr != want.data() + want.size()) {
    return absl::InvalidArgumentError(StrCat(
        "device must be \"auto\", \"software\" or an EGL device index, got \"", want, "\""));
  }
  if (index >= devices.size()) {
    return absl::InvalidArgumentError(StrCat("device index must be below ", devices.size(),
                                                   " (EGL devices found), got ", index));
  }
  return open_device(index);
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

// The embedded shader `name` with each line `#include "other.glsl"` replaced by that file's
// text (one level deep; `file` numbers the #line directives that follow).
absl::StatusOr<std::string> ExpandIncludes(std::string_view name, int file) {
  std::optional<std::string_view> text = EmbeddedShader(name);
  if (!text) return absl::NotFoundError(StrCat("no shader named \"", name, "\""));
  std::string out;
  int line_no = 0;
  for (std::string_view rest = *text; !rest.empty();) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    ++line_no;
    constexpr std::string_view kInclude = "#include \"";
    if (line.substr(0, kInclude.size()) == kInclude) {
      std::string_view inc = line.substr(kInclude.size());
      inc = inc.substr(0, inc.find('"'));
      inc = inc.substr(0, inc.rfind('.'));
      std::optional<std::string_view> inc_text = EmbeddedShader(inc);
      if (!inc_text) {
        return absl::NotFoundError(StrCat("shader ", name, " includes unknown \"", inc, "\""));
      }
      StrAppend(&out, "#line 1 ", file + 1000, "\n", *inc_text, "\n#line ", line_no + 1, " ",
                      file, "\n");
    } else {
      StrAppend(&out, line, "\n");
    }
  }
  return out;
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
  if (*display == EGL_NO_DISPLAY) return EglFailure(StrCat("eglGetPlatformDisplay(", info.platform, ")"));
  EGLint major = 0, minor = 0;
  if (!DisplayUsers::Initialize(*display, &major, &minor)) return EglFailure("eglInitialize");
  ctx->display_ = *display;
  if (LoadOnce(&g_egl_display_loaded, [&] { return gladLoaderLoadEGL(*display); }) == 0) {
    return absl::UnavailableError("glad could not load EGL");
  }
  info.egl_vendor = eglQueryString(*display, EGL_VENDOR);
  info.egl_version = eglQueryString(*display, EGL_VERSION);
  const char* display_ext = eglQueryString(*display, EGL_EXTENSIONS);
  if (!HasExtension(display_ext, "EGL_KHR_surfaceless_context") ||
      !HasExtension(display_ext, "EGL_KHR_no_config_context")) {
    return absl::UnavailableError(StrCat(
        "EGL display (", info.platform, ", ", info.egl_vendor,
        ") lacks EGL_KHR_surfaceless_context or EGL_KHR_no_config_context"));
  }
  if (!eglBindAPI(EGL_OPENGL_API)) return EglFailure("eglBindAPI(EGL_OPENGL_API)");
  const EGLint attribs[] = {EGL_CONTEXT_MAJOR_VERSION, 4,
                            EGL_CONTEXT_MINOR_VERSION, 3,
                            EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
                            EGL_CONTEXT_OPENGL_DEBUG, options.debug_output ? EGL_TRUE : EGL_FALSE,
                            EGL_NONE};
  EGLContext context = eglCreateContext(*display, EGL_NO_CONFIG_KHR, EGL_NO_CONTEXT, attribs);
  if (context == EGL_NO_CONTEXT) return EglFailure("eglCreateContext (OpenGL 4.3 core)");
  ctx->context_ = context;
  if (!eglMakeCurrent(*display, EGL_NO_SURFACE, EGL_NO_SURFACE, context)) {
    return EglFailure("eglMakeCurrent");
  }
  if (LoadOnce(&g_gl_loaded, [] {
        return gladLoadGL(reinterpret_cast<GLADloadfunc>(eglGetProcAddress));
      }) == 0) {
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
  spdlog::log(options.log_renderer ? spdlog::level::info : spdlog::level::debug,
              "GL context: {} | {} | {} (EGL {} {}, {})", info.vendor, info.renderer,
              info.version, info.egl_vendor, info.egl_version, info.platform);
  if (info.software && options.pin_driver_threads) {
    ctx->pinned_threads_ = DisplayUsers::PinDriverThreads(
        *display, *capture, options.log_renderer ? spdlog::level::info : spdlog::level::debug);
  }
  capture.reset();  // the calling thread gets its name back
  return ctx;
}

Context::~Context() {
  textures_.Clear();
  pending_.clear();  // (a ProgramBatch finishes before its context goes; this is a backstop)
  programs_.clear();
  if (display_ != nullptr) {
    eglMakeCurrent(display_, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    if (context_ != nullptr) eglDestroyContext(display_, context_);
    DisplayUsers::Terminate(display_);
  }
}

absl::StatusOr<GLuint> Context::Program(std::string_view name, std::string_view defines) {
  std::string key = StrCat(name, "\n", defines);
  if (auto it = programs_.find(key); it != programs_.end()) return it->second.get();

  absl::StatusOr<std::string> body = ExpandIncludes(name, 2);
  if (!body.ok()) return body.status();
  absl::StatusOr<std::string> prelude = ExpandIncludes("prelude", 1);
  if (!prelude.ok()) return prelude.status();
  std::string source = StrCat(
      "#version 430 core\n",
      info_.limits.int64 ? "#extension GL_ARB_gpu_shader_int64 : enable\n#define HAVE_INT64 1\n"
                         : "",
      info_.limits.subgroup_ballot
          ? "#extension GL_ARB_shader_ballot : enable\n#define HAVE_BALLOT 1\n"
          : "",
      defines, "\n#line 1 1\n", *prelude, "\n#line 1 2\n", *body);

  GlShader shader = GlShader::Create();
  const char* src = source.c_str();
  glShaderSource(shader.get(), 1, &src, nullptr);
  glCompileShader(shader.get());
  // Linked at once: a driver that compiles in the background (GL_KHR_parallel_shader_compile)
  // takes both and returns; a failed compile fails the link, and CheckBuilt reports the compile.
  GlProgram program = GlProgram::Create();
  glAttachShader(program.get(), shader.get());
  glLinkProgram(program.get());
  const GLuint id = program.get();
  if (batches_ > 0) {
    pending_.push_back({key, std::string(name), std::string(defines), std::move(shader)});
  } else if (absl::Status s = CheckBuilt(name, defines, shader.get(), id); !s.ok()) {
    return s;
  }
  programs_.emplace(std::move(key), std::move(program));
  return id;
}

absl::Status Context::CheckBuilt(std::string_view name, std::string_view defines, GLuint shader,
                                 GLuint program) {
  auto info_log = [](GLuint obj, bool is_program) {
    GLint len = 0;
    (is_program ? glGetProgramiv : glGetShaderiv)(obj, GL_INFO_LOG_LENGTH, &len);
    std::string log(static_cast<size_t>(std::max(len, 1)), '\0');
    (is_program ? glGetProgramInfoLog : glGetShaderInfoLog)(obj, len, nullptr, log.data());
    return log;
  };
  GLint ok = 0;
  glGetShaderiv(shader, GL_COMPILE_STATUS, &ok);
  if (!ok) {
    return absl::InternalError(StrCat("compiling shader ", name, " (defines: ", defines,
                                      ") failed (file 1 = prelude, 2 = shader):\n",
                                      info_log(shader, false)));
  }
  glGetProgramiv(program, GL_LINK_STATUS, &ok);
  if (!ok) {
    return absl::InternalError(
        StrCat("linking shader ", name, " failed:\n", info_log(program, true)));
  }
  return absl::OkStatus();
}

absl::Status Context::FinishPending() {
  absl::Status first;
  for (PendingProgram& p : std::exchange(pending_, {})) {
    auto it = programs_.find(p.key);
    absl::Status s = CheckBuilt(p.name, p.defines, p.shader.get(), it->second.get());
    if (!s.ok()) {
      programs_.erase(it);
      first.Update(s);
    }
  }
  return first;
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

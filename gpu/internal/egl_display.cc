#include "gpu/internal/egl_display.h"

#include <charconv>
#include <mutex>
#include <string>
#include <vector>

#include "common/str.h"

namespace glimpse::gpu {

std::string EglErrorName(EGLint e) {
  switch (e) {
    case EGL_SUCCESS:
      return "EGL_SUCCESS";
    case EGL_NOT_INITIALIZED:
      return "EGL_NOT_INITIALIZED";
    case EGL_BAD_ACCESS:
      return "EGL_BAD_ACCESS";
    case EGL_BAD_ALLOC:
      return "EGL_BAD_ALLOC";
    case EGL_BAD_ATTRIBUTE:
      return "EGL_BAD_ATTRIBUTE";
    case EGL_BAD_CONFIG:
      return "EGL_BAD_CONFIG";
    case EGL_BAD_CONTEXT:
      return "EGL_BAD_CONTEXT";
    case EGL_BAD_DISPLAY:
      return "EGL_BAD_DISPLAY";
    case EGL_BAD_MATCH:
      return "EGL_BAD_MATCH";
    case EGL_BAD_PARAMETER:
      return "EGL_BAD_PARAMETER";
    default:
      return StrCat("EGL error 0x", fmt::format("{:x}", e));
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

namespace {

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

}  // namespace

int LoadEglDisplayOnce(EGLDisplay display) {
  return LoadOnce(&g_egl_display_loaded, [&] { return gladLoaderLoadEGL(display); });
}

int LoadGlOnce() {
  return LoadOnce(&g_gl_loaded,
                  [] { return gladLoadGL(reinterpret_cast<GLADloadfunc>(eglGetProcAddress)); });
}

// Picks the EGL display per options.device; fills info->platform.
absl::StatusOr<EGLDisplay> OpenDisplay(const ContextOptions& options, DeviceInfo* info) {
  // Before a display exists glad only has EGL 1.0: fetch the extension entry points by hand.
  if (LoadOnce(&g_egl_client_loaded, [] { return gladLoaderLoadEGL(EGL_NO_DISPLAY); }) == 0) {
    return absl::UnavailableError(
        "cannot load libEGL (install libegl1 and a driver: Mesa or NVIDIA)");
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
    return absl::InvalidArgumentError(
        StrCat("device must be \"auto\", \"software\" or an EGL device index, got \"", want, "\""));
  }
  if (index >= devices.size()) {
    return absl::InvalidArgumentError(
        StrCat("device index must be below ", devices.size(), " (EGL devices found), got ", index));
  }
  return open_device(index);
}

}  // namespace glimpse::gpu

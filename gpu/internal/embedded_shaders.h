// Compute shader sources compiled into the binary from gpu/shaders/ (see cmake/embed.cmake).
#ifndef GLIMPSE_GPU_INTERNAL_EMBEDDED_SHADERS_H_
#define GLIMPSE_GPU_INTERNAL_EMBEDDED_SHADERS_H_

#include <optional>
#include <string_view>

namespace glimpse::gpu {

// The text of gpu/shaders/<name>.comp or <name>.glsl, or nullopt if there is none.
std::optional<std::string_view> EmbeddedShader(std::string_view name);

}  // namespace glimpse::gpu

#endif  // GLIMPSE_GPU_INTERNAL_EMBEDDED_SHADERS_H_

// Setting a compute program's uniforms by name, for every kernel of gpu/.
#ifndef GLIMPSE_GPU_INTERNAL_UNIFORMS_H_
#define GLIMPSE_GPU_INTERNAL_UNIFORMS_H_

#include <glad/gl.h>

#include <cstdint>

namespace glimpse::gpu {

// glProgramUniform*: the program need not be bound. A name the program does not use (the
// compiler dropped it, or this variant has no such uniform) has location -1 and is skipped.
inline void SetInt(GLuint program, const char* name, int v) {
  if (GLint l = glGetUniformLocation(program, name); l >= 0) glProgramUniform1i(program, l, v);
}
inline void SetUint(GLuint program, const char* name, uint64_t v) {
  if (GLint l = glGetUniformLocation(program, name); l >= 0) {
    glProgramUniform1ui(program, l, GLuint(v));
  }
}

}  // namespace glimpse::gpu

#endif  // GLIMPSE_GPU_INTERNAL_UNIFORMS_H_

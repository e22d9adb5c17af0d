// Move-only owners of GL object names. Each destructor deletes its name; wrap()/release() adopt
// or give up a raw name. REQUIRES: constructed and destroyed on the thread that owns the context.
//
//   Buffer counts = Buffer::Create(size_t(bins) * sizeof(uint32_t));
//   counts.Zero();
//   counts.BindBase(0);  // layout(binding = 0) buffer in the shader
//   glDispatchCompute(groups_x, groups_y, 1);
//   glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
//   std::vector<uint32_t> host(bins);
//   counts.Read(0, counts.bytes(), host.data());
//   GlTexture texture = GlTexture::Create();  // glDeleteTextures when it goes, unless Release()d
#ifndef GLIMPSE_GPU_GL_HANDLES_H_
#define GLIMPSE_GPU_GL_HANDLES_H_

#include <glad/gl.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace glimpse::gpu {

template <typename Traits>
class GlHandle {
 public:
  GlHandle() = default;
  static GlHandle Create() { return GlHandle(Traits::Create()); }
  static GlHandle Wrap(GLuint name) { return GlHandle(name); }
  ~GlHandle() { Reset(); }

  GlHandle(GlHandle&& other) noexcept : name_(std::exchange(other.name_, 0)) {}
  GlHandle& operator=(GlHandle&& other) noexcept {
    if (this != &other) {
      Reset();
      name_ = std::exchange(other.name_, 0);
    }
    return *this;
  }
  GlHandle(const GlHandle&) = delete;
  GlHandle& operator=(const GlHandle&) = delete;

  GLuint get() const { return name_; }
  explicit operator bool() const { return name_ != 0; }
  GLuint Release() { return std::exchange(name_, 0); }
  void Reset() {
    if (name_ != 0) Traits::Destroy(name_);
    name_ = 0;
  }

 private:
  explicit GlHandle(GLuint name) : name_(name) {}
  GLuint name_ = 0;
};

struct BufferTraits {
  static GLuint Create() {
    GLuint n = 0;
    glGenBuffers(1, &n);
    return n;
  }
  static void Destroy(GLuint n) { glDeleteBuffers(1, &n); }
};
struct TextureTraits {
  static GLuint Create() {
    GLuint n = 0;
    glGenTextures(1, &n);
    return n;
  }
  static void Destroy(GLuint n) { glDeleteTextures(1, &n); }
};
struct QueryTraits {
  static GLuint Create() {
    GLuint n = 0;
    glGenQueries(1, &n);
    return n;
  }
  static void Destroy(GLuint n) { glDeleteQueries(1, &n); }
};
struct ShaderTraits {
  static GLuint Create() { return glCreateShader(GL_COMPUTE_SHADER); }
  static void Destroy(GLuint n) { glDeleteShader(n); }
};
struct ProgramTraits {
  static GLuint Create() { return glCreateProgram(); }
  static void Destroy(GLuint n) { glDeleteProgram(n); }
};

using GlBuffer = GlHandle<BufferTraits>;
using GlTexture = GlHandle<TextureTraits>;
using GlQuery = GlHandle<QueryTraits>;
using GlShader = GlHandle<ShaderTraits>;
using GlProgram = GlHandle<ProgramTraits>;

// A shader storage buffer of a fixed size in bytes.
class Buffer {
 public:
  Buffer() = default;
  // Allocates `bytes` (contents undefined unless `data` is given). GL_DYNAMIC_COPY usage.
  static Buffer Create(size_t bytes, const void* data = nullptr) {
    Buffer b;
    b.handle_ = GlBuffer::Create();
    b.bytes_ = bytes;
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, b.handle_.get());
    glBufferData(GL_SHADER_STORAGE_BUFFER, static_cast<GLsizeiptr>(bytes), data, GL_DYNAMIC_COPY);
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
    return b;
  }
  // `kept` if it holds at least `bytes` (its contents kept), else a new buffer of `bytes` in its
  // place (contents undefined). For work buffers kept between calls: a fresh buffer costs the
  // driver an allocation, and on llvmpipe a page fault per 4 KiB written.
  static Buffer& AtLeast(Buffer& kept, size_t bytes) {
    if (!kept || kept.bytes_ < bytes) {
      kept = Buffer();
      kept = Create(bytes);
    }
    return kept;
  }
  GLuint get() const { return handle_.get(); }
  size_t bytes() const { return bytes_; }
  explicit operator bool() const { return static_cast<bool>(handle_); }

  void BindBase(GLuint index) const { glBindBufferBase(GL_SHADER_STORAGE_BUFFER, index, get()); }
  void BindRange(GLuint index, size_t offset, size_t size) const {
    glBindBufferRange(GL_SHADER_STORAGE_BUFFER, index, get(), static_cast<GLintptr>(offset),
                      static_cast<GLsizeiptr>(size));
  }
  // Fills the whole buffer with zero bytes.
  void Zero() const {
    const GLuint zero = 0;
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, get());
    glClearBufferData(GL_SHADER_STORAGE_BUFFER, GL_R32UI, GL_RED_INTEGER, GL_UNSIGNED_INT, &zero);
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
  }
  void Upload(size_t offset, size_t size, const void* data) const {
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, get());
    glBufferSubData(GL_SHADER_STORAGE_BUFFER, static_cast<GLintptr>(offset),
                    static_cast<GLsizeiptr>(size), data);
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
  }
  // Copies `size` bytes at `offset` back to host memory (waits for the GPU).
  void Read(size_t offset, size_t size, void* out) const {
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, get());
    glGetBufferSubData(GL_SHADER_STORAGE_BUFFER, static_cast<GLintptr>(offset),
                       static_cast<GLsizeiptr>(size), out);
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
  }
  // Maps `size` bytes at `offset` for reading (waits for the GPU), passes their address to `use`
  // and unmaps them. False where the driver could not map them (a GL error says why).
  template <typename F>
  bool ReadMapped(size_t offset, size_t size, F&& use) const {
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, get());
    const void* p = glMapBufferRange(GL_SHADER_STORAGE_BUFFER, static_cast<GLintptr>(offset),
                                     static_cast<GLsizeiptr>(size), GL_MAP_READ_BIT);
    if (p != nullptr) {
      use(static_cast<const uint8_t*>(p));
      glUnmapBuffer(GL_SHADER_STORAGE_BUFFER);
    }
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
    return p != nullptr;
  }

 private:
  GlBuffer handle_;
  size_t bytes_ = 0;
};

}  // namespace glimpse::gpu

#endif  // GLIMPSE_GPU_GL_HANDLES_H_

// Textures of freed images, kept for the next image of the same format and sides. An image
// uploaded with each call (inline pixels, freed with the job) would otherwise get new texture
// storage every time, which the driver backs with fresh pages: on a CPU renderer every page is
// faulted in and zeroed by the kernel during the upload's copy. A kept texture's old contents are
// overwritten by the next image's upload before any kernel reads it.
//
// Example (on the context's thread):
//   TexturePool pool(size_t{128} << 20);
//   GlTexture t = pool.Take(GL_RGBA32UI, 720, 1081, [] { return NewTextureSomehow(); });
//   pool.Give(std::move(t), GL_RGBA32UI, 720, 1081, 720 * 1081 * 16);
#ifndef GLIMPSE_GPU_TEXTURE_POOL_H_
#define GLIMPSE_GPU_TEXTURE_POOL_H_

#include <cstddef>
#include <deque>
#include <functional>

#include "gpu/gl_handles.h"

namespace glimpse::gpu {

// REQUIRES: every method, and the destructor, on the thread that owns the GL context.
class TexturePool {
 public:
  explicit TexturePool(size_t max_bytes) : max_bytes_(max_bytes) {}

  // A kept texture of exactly this storage format and these sides, else make().
  GlTexture Take(GLenum internal_format, int width, int height,
                 const std::function<GlTexture()>& make);
  // Keeps `texture` (`bytes` of storage) for a later Take; the oldest kept go first past
  // max_bytes. A texture larger than max_bytes is deleted at once.
  void Give(GlTexture texture, GLenum internal_format, int width, int height, size_t bytes);
  // Deletes every kept texture.
  void Clear();

  size_t bytes() const { return bytes_; }
  size_t count() const { return kept_.size(); }

 private:
  struct Kept {
    GLenum internal_format;
    int width, height;
    size_t bytes;
    GlTexture texture;
  };
  const size_t max_bytes_;
  size_t bytes_ = 0;
  std::deque<Kept> kept_;  // oldest first
};

}  // namespace glimpse::gpu

#endif  // GLIMPSE_GPU_TEXTURE_POOL_H_

#include "gpu/texture_pool.h"

#include <utility>

namespace glimpse::gpu {

GlTexture TexturePool::Take(GLenum internal_format, int width, int height,
                            const std::function<GlTexture()>& make) {
  // The newest first: its pages are the likeliest to be in the CPU's caches.
  for (auto it = kept_.rbegin(); it != kept_.rend(); ++it) {
    if (it->internal_format != internal_format || it->width != width || it->height != height) {
      continue;
    }
    GlTexture t = std::move(it->texture);
    bytes_ -= it->bytes;
    kept_.erase(std::next(it).base());
    return t;
  }
  return make();
}

void TexturePool::Give(GlTexture texture, GLenum internal_format, int width, int height,
                       size_t bytes) {
  if (!texture || bytes > max_bytes_) return;
  while (!kept_.empty() && bytes_ + bytes > max_bytes_) {
    bytes_ -= kept_.front().bytes;
    kept_.pop_front();
  }
  kept_.push_back({internal_format, width, height, bytes, std::move(texture)});
  bytes_ += bytes;
}

void TexturePool::Clear() {
  kept_.clear();
  bytes_ = 0;
}

}  // namespace glimpse::gpu

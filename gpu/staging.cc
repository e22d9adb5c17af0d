#include "gpu/staging.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "common/str.h"

namespace glimpse::gpu {
namespace {

size_t RoundUp(size_t n) {
  return (n + kStagingAlignment - 1) / kStagingAlignment * kStagingAlignment;
}

}  // namespace

StagingBlock::~StagingBlock() { Release(); }

StagingBlock::StagingBlock(StagingBlock&& other) noexcept
    : arena_(std::move(other.arena_)),
      slab_(other.slab_),
      offset_(other.offset_),
      size_(other.size_),
      data_(std::exchange(other.data_, nullptr)) {}

StagingBlock& StagingBlock::operator=(StagingBlock&& other) noexcept {
  if (this != &other) {
    Release();
    arena_ = std::move(other.arena_);
    slab_ = other.slab_;
    offset_ = other.offset_;
    size_ = other.size_;
    data_ = std::exchange(other.data_, nullptr);
  }
  return *this;
}

void StagingBlock::Release() {
  if (data_ != nullptr) arena_->Release(slab_, offset_);
  arena_.reset();
  data_ = nullptr;
}

bool StagingArena::AddSlab(uint8_t* base, size_t capacity) {
  std::lock_guard lock(mu_);
  if (closed_ || capacity == 0 || mapped_ + capacity > limit_) return false;
  Slab& slab = slabs_.emplace_back();
  slab.base = base;
  slab.capacity = capacity;
  slab.free.emplace(0, capacity);
  mapped_ += capacity;
  wanted_ = 0;
  return true;
}

StagingBlock StagingArena::Reserve(size_t bytes) {
  if (bytes == 0) return {};
  const size_t size = RoundUp(bytes);
  std::lock_guard lock(mu_);
  if (!closed_) {
    for (size_t i = 0; i < slabs_.size(); ++i) {
      Slab& slab = slabs_[i];
      for (auto it = slab.free.begin(); it != slab.free.end(); ++it) {  // first fit
        if (it->second < size) continue;
        const size_t offset = it->first, rest = it->second - size;
        slab.free.erase(it);
        if (rest > 0) slab.free.emplace(offset + size, rest);
        slab.held.emplace(offset, Held{size, nullptr});
        in_use_ += size;
        return StagingBlock(shared_from_this(), i, offset, size, slab.base + offset);
      }
    }
  }
  ++refused_;
  wanted_ = std::max(wanted_, size);
  return {};
}

size_t StagingArena::mapped() const {
  std::lock_guard lock(mu_);
  return mapped_;
}

size_t StagingArena::bytes_in_use() const {
  std::lock_guard lock(mu_);
  return in_use_;
}

uint64_t StagingArena::refused() const {
  std::lock_guard lock(mu_);
  return refused_;
}

void StagingArena::Release(size_t slab, size_t offset) {
  std::lock_guard lock(mu_);
  std::map<size_t, Held>& held = slabs_[slab].held;
  auto it = held.find(offset);
  if (it == held.end()) return;
  if (it->second.fence == nullptr && !closed_) {
    Free(slab, offset, it->second.size);  // never read by the device: free at once
  } else {
    gone_.push_back({slab, offset, it->second});
  }
  held.erase(it);
}

void StagingArena::Free(size_t slab, size_t offset, size_t size) {
  in_use_ -= size;
  std::map<size_t, size_t>& free = slabs_[slab].free;
  auto next = free.lower_bound(offset);
  if (next != free.end() && offset + size == next->first) {
    size += next->second;
    next = free.erase(next);
  }
  if (next != free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      return;
    }
  }
  free.emplace(offset, size);
}

absl::StatusOr<std::unique_ptr<StagingBuffer>> StagingBuffer::Create(size_t limit) {
  if (!GLAD_GL_ARB_buffer_storage) {
    return absl::UnavailableError(
        "staging memory needs GL_ARB_buffer_storage, which the driver lacks");
  }
  return std::unique_ptr<StagingBuffer>(
      new StagingBuffer(std::make_shared<StagingArena>(RoundUp(limit))));
}

bool StagingBuffer::MapSlab(size_t bytes) {
  while (glGetError() != GL_NO_ERROR) {
  }
  GLuint buffer = 0;
  glGenBuffers(1, &buffer);
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, buffer);
  // Read as well as written: a block's pixels are read back on the host now and then (to share an
  // image through the shared store), which write-combined device memory would make slow.
  const GLbitfield access =
      GL_MAP_WRITE_BIT | GL_MAP_READ_BIT | GL_MAP_PERSISTENT_BIT | GL_MAP_COHERENT_BIT;
  glBufferStorage(GL_PIXEL_UNPACK_BUFFER, GLsizeiptr(bytes), nullptr,
                  access | GL_CLIENT_STORAGE_BIT);
  void* base = glGetError() == GL_NO_ERROR
                   ? glMapBufferRange(GL_PIXEL_UNPACK_BUFFER, 0, GLsizeiptr(bytes), access)
                   : nullptr;
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
  if (base == nullptr || !arena_->AddSlab(static_cast<uint8_t*>(base), bytes)) {
    glDeleteBuffers(1, &buffer);
    while (glGetError() != GL_NO_ERROR) {
    }
    if (!refused_by_driver_) {
      spdlog::warn(
          "staging memory: the driver refused a persistently mapped buffer of {} bytes; "
          "images go on through ordinary memory",
          bytes);
    }
    refused_by_driver_ = true;
    return false;
  }
  buffers_.push_back(buffer);
  spdlog::debug("staging memory: mapped a slab of {} bytes, {} of at most {} in all", bytes,
                arena_->mapped(), arena_->limit());
  return true;
}

StagingBuffer::~StagingBuffer() {
  std::vector<GLsync> fences;
  size_t held = 0;
  {
    std::lock_guard lock(arena_->mu_);
    arena_->closed_ = true;
    for (StagingArena::Slab& slab : arena_->slabs_) {
      held += slab.held.size();
      for (auto& [offset, h] : slab.held) {
        if (h.fence != nullptr) fences.push_back(std::exchange(h.fence, nullptr));
      }
    }
    for (StagingArena::Gone& g : arena_->gone_) {
      if (g.held.fence != nullptr) fences.push_back(g.held.fence);
    }
    arena_->gone_.clear();
  }
  if (held > 0) {
    spdlog::error("staging memory: {} block(s) still held as the buffer goes", held);
  }
  for (GLsync f : fences) glDeleteSync(f);
  for (GLuint buffer : buffers_) {
    glBindBuffer(GL_PIXEL_UNPACK_BUFFER, buffer);
    glUnmapBuffer(GL_PIXEL_UNPACK_BUFFER);
  }
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
  if (!buffers_.empty()) glDeleteBuffers(GLsizei(buffers_.size()), buffers_.data());
}

void StagingBuffer::Read(const StagingBlock& block) {
  if (!block || !block.from(*arena_)) return;
  GLsync fence = glFenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0);
  GLsync old = fence;  // (kept only if the block were unknown, which cannot be: it is alive)
  {
    std::lock_guard lock(arena_->mu_);
    std::map<size_t, StagingArena::Held>& held = arena_->slabs_[block.slab()].held;
    auto it = held.find(block.offset());
    if (it != held.end()) old = std::exchange(it->second.fence, fence);
  }
  if (old != nullptr) glDeleteSync(old);
}

StagingBlock StagingBuffer::Reserve(size_t bytes) {
  if (StagingBlock block = arena_->Reserve(bytes)) return block;
  Reclaim();
  return arena_->Reserve(bytes);
}

void StagingBuffer::Reclaim() {
  std::vector<StagingArena::Gone> gone;
  size_t wanted = 0;
  {
    std::lock_guard lock(arena_->mu_);
    gone.swap(arena_->gone_);
    wanted = arena_->wanted_;
  }
  std::vector<StagingArena::Gone> pending, done;
  for (StagingArena::Gone& g : gone) {
    if (g.held.fence != nullptr) {
      const GLenum r = glClientWaitSync(g.held.fence, 0, 0);
      if (r == GL_TIMEOUT_EXPIRED) {
        pending.push_back(g);
        continue;
      }
      glDeleteSync(g.held.fence);
    }
    done.push_back(g);
  }
  {
    std::lock_guard lock(arena_->mu_);
    for (const StagingArena::Gone& g : done) arena_->Free(g.slab, g.offset, g.held.size);
    arena_->gone_.insert(arena_->gone_.end(), pending.begin(), pending.end());
  }
  // A reservation found no room: one more slab, of what it wanted if that is larger, or what the
  // limit has left (a quarter slab at least), which serves smaller images if not that one.
  const size_t room = arena_->limit() - arena_->mapped();
  if (wanted > 0 && !refused_by_driver_ && room > 0 &&
      (room >= wanted || room >= kStagingSlabBytes / 4)) {
    MapSlab(std::min(room, std::max(kStagingSlabBytes, wanted)));
  }
}

size_t StagingBuffer::blocks_held() const {
  std::lock_guard lock(arena_->mu_);
  size_t held = 0;
  for (const StagingArena::Slab& slab : arena_->slabs_) held += slab.held.size();
  return held;
}

}  // namespace glimpse::gpu

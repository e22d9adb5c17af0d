#include "gpu/staging.h"

#include <spdlog/spdlog.h>

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
      offset_(other.offset_),
      size_(other.size_),
      data_(std::exchange(other.data_, nullptr)) {}

StagingBlock& StagingBlock::operator=(StagingBlock&& other) noexcept {
  if (this != &other) {
    Release();
    arena_ = std::move(other.arena_);
    offset_ = other.offset_;
    size_ = other.size_;
    data_ = std::exchange(other.data_, nullptr);
  }
  return *this;
}

void StagingBlock::Release() {
  if (data_ != nullptr) arena_->Release(offset_);
  arena_.reset();
  data_ = nullptr;
}

StagingArena::StagingArena(uint8_t* base, size_t capacity) : base_(base), capacity_(capacity) {
  if (capacity_ > 0) free_.emplace(0, capacity_);
}

StagingBlock StagingArena::Reserve(size_t bytes) {
  if (bytes == 0) return {};
  const size_t size = RoundUp(bytes);
  std::lock_guard lock(mu_);
  if (!closed_) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {  // first fit
      if (it->second < size) continue;
      const size_t offset = it->first, rest = it->second - size;
      free_.erase(it);
      if (rest > 0) free_.emplace(offset + size, rest);
      held_.emplace(offset, Held{size, nullptr});
      in_use_ += size;
      return StagingBlock(shared_from_this(), offset, size, base_ + offset);
    }
  }
  ++refused_;
  return {};
}

size_t StagingArena::bytes_in_use() const {
  std::lock_guard lock(mu_);
  return in_use_;
}

uint64_t StagingArena::refused() const {
  std::lock_guard lock(mu_);
  return refused_;
}

void StagingArena::Release(size_t offset) {
  std::lock_guard lock(mu_);
  auto it = held_.find(offset);
  if (it == held_.end()) return;
  if (it->second.fence == nullptr && !closed_) {
    Free(offset, it->second.size);  // never read by the device: free at once
  } else {
    gone_.emplace_back(offset, it->second);
  }
  held_.erase(it);
}

void StagingArena::Free(size_t offset, size_t size) {
  in_use_ -= size;
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      return;
    }
  }
  free_.emplace(offset, size);
}

absl::StatusOr<std::unique_ptr<StagingBuffer>> StagingBuffer::Create(size_t bytes) {
  if (!GLAD_GL_ARB_buffer_storage) {
    return absl::UnavailableError(
        "staging memory needs GL_ARB_buffer_storage, which the driver lacks");
  }
  const size_t size = RoundUp(bytes);
  while (glGetError() != GL_NO_ERROR) {
  }
  GLuint buffer = 0;
  glGenBuffers(1, &buffer);
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, buffer);
  // Read as well as written: a block's pixels are read back on the host now and then (to share an
  // image through the shared store), which write-combined device memory would make slow.
  const GLbitfield access =
      GL_MAP_WRITE_BIT | GL_MAP_READ_BIT | GL_MAP_PERSISTENT_BIT | GL_MAP_COHERENT_BIT;
  glBufferStorage(GL_PIXEL_UNPACK_BUFFER, GLsizeiptr(size), nullptr,
                  access | GL_CLIENT_STORAGE_BIT);
  void* base = glGetError() == GL_NO_ERROR
                   ? glMapBufferRange(GL_PIXEL_UNPACK_BUFFER, 0, GLsizeiptr(size), access)
                   : nullptr;
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
  if (base == nullptr) {
    glDeleteBuffers(1, &buffer);
    while (glGetError() != GL_NO_ERROR) {
    }
    return absl::ResourceExhaustedError(
        StrCat("the driver refused a persistently mapped staging buffer of ", size, " bytes"));
  }
  auto arena = std::make_shared<StagingArena>(static_cast<uint8_t*>(base), size);
  return std::unique_ptr<StagingBuffer>(new StagingBuffer(buffer, std::move(arena)));
}

StagingBuffer::~StagingBuffer() {
  std::vector<GLsync> fences;
  size_t held = 0;
  {
    std::lock_guard lock(arena_->mu_);
    arena_->closed_ = true;
    held = arena_->held_.size();
    for (auto& [offset, h] : arena_->held_) {
      if (h.fence != nullptr) fences.push_back(std::exchange(h.fence, nullptr));
    }
    for (auto& [offset, h] : arena_->gone_) {
      if (h.fence != nullptr) fences.push_back(h.fence);
    }
    arena_->gone_.clear();
  }
  if (held > 0) {
    spdlog::error("staging memory: {} block(s) still held as the buffer goes", held);
  }
  for (GLsync f : fences) glDeleteSync(f);
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, buffer_);
  glUnmapBuffer(GL_PIXEL_UNPACK_BUFFER);
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
  glDeleteBuffers(1, &buffer_);
}

void StagingBuffer::Read(const StagingBlock& block) {
  if (!block || !block.from(*arena_)) return;
  GLsync fence = glFenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0);
  GLsync old = nullptr;
  {
    std::lock_guard lock(arena_->mu_);
    auto it = arena_->held_.find(block.offset());
    if (it == arena_->held_.end()) {
      old = fence;  // (cannot happen: the block is alive)
    } else {
      old = std::exchange(it->second.fence, fence);
    }
  }
  if (old != nullptr) glDeleteSync(old);
}

void StagingBuffer::Reclaim() {
  std::vector<std::pair<size_t, StagingArena::Held>> gone;
  {
    std::lock_guard lock(arena_->mu_);
    if (arena_->gone_.empty()) return;
    gone.swap(arena_->gone_);
  }
  std::vector<std::pair<size_t, StagingArena::Held>> pending;
  std::vector<std::pair<size_t, size_t>> done;
  for (auto& [offset, h] : gone) {
    if (h.fence != nullptr) {
      const GLenum r = glClientWaitSync(h.fence, 0, 0);
      if (r == GL_TIMEOUT_EXPIRED) {
        pending.emplace_back(offset, h);
        continue;
      }
      glDeleteSync(h.fence);
    }
    done.emplace_back(offset, h.size);
  }
  std::lock_guard lock(arena_->mu_);
  for (auto [offset, size] : done) arena_->Free(offset, size);
  arena_->gone_.insert(arena_->gone_.end(), pending.begin(), pending.end());
}

size_t StagingBuffer::blocks_held() const {
  std::lock_guard lock(arena_->mu_);
  return arena_->held_.size();
}

}  // namespace glimpse::gpu

// Staging memory: host memory the device uploads textures from as it is, so that an image's pixels
// reach the device through one copy. One persistently mapped pixel-unpack buffer
// (GL_ARB_buffer_storage, core since GL 4.4) is carved into blocks: a host thread (a decoder)
// reserves a block and writes an image's rows into it, laid out as the upload takes them
// (StagedRowsFor); the context's thread then fills the image's texture from the block
// (Image::Upload) with no copy of its own on the host. A block's bytes are reused once the block
// is gone and the device has finished reading them: each upload leaves a fence, checked on the
// context's thread (StagingBuffer::Reclaim). When no block is free the caller uses ordinary host
// memory, as without staging: a reservation never waits.
//
//   // On the context's thread, once (Context::Create does it when asked for staging bytes):
//   std::shared_ptr<StagingArena> arena = ctx.staging()->arena();
//   // On any thread:
//   const StagedRows layout = StagedRowsFor(ctx_limits, desc);
//   StagingBlock block = arena->Reserve(layout.bytes(desc));
//   if (block) DecodeInto(file, probed, layout.channels, block.bytes(), layout.row_stride, ...);
//   // On the context's thread:
//   absl::StatusOr<Image> image = Image::Upload(ctx, desc, block);
//
// On GPUs the buffer is client storage (GL_CLIENT_STORAGE_BIT) that the device reads by DMA, so
// the upload returns before the copy is done and the decoders' next images overlap it; on CPU
// renderers it is ordinary host memory, written once and kept, so that decoders write into pages
// already faulted in rather than a fresh mapping per image.
#ifndef GLIMPSE_GPU_STAGING_H_
#define GLIMPSE_GPU_STAGING_H_

#include <glad/gl.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace glimpse::gpu {

class StagingArena;
class StagingBuffer;

// A reserved run of staging memory. Move-only; any thread may hold, write and drop it. Its bytes
// go back to the arena when it is destroyed (once the device has read them).
class StagingBlock {
 public:
  StagingBlock() = default;
  ~StagingBlock();
  StagingBlock(StagingBlock&& other) noexcept;
  StagingBlock& operator=(StagingBlock&& other) noexcept;
  StagingBlock(const StagingBlock&) = delete;
  StagingBlock& operator=(const StagingBlock&) = delete;

  explicit operator bool() const { return data_ != nullptr; }
  // The block's bytes, for the holder to write before the upload and to read at any time.
  std::span<uint8_t> bytes() const { return {data_, size_}; }
  // Where the block starts in the staging buffer (a multiple of kStagingAlignment).
  size_t offset() const { return offset_; }
  // Whether the block was carved from `arena`.
  bool from(const StagingArena& arena) const { return arena_.get() == &arena; }

 private:
  friend class StagingArena;
  StagingBlock(std::shared_ptr<StagingArena> arena, size_t offset, size_t size, uint8_t* data)
      : arena_(std::move(arena)), offset_(offset), size_(size), data_(data) {}
  void Release();

  std::shared_ptr<StagingArena> arena_;
  size_t offset_ = 0, size_ = 0;
  uint8_t* data_ = nullptr;
};

// Blocks are aligned to cache lines (and so to any texel's size, as GL wants of an unpack
// buffer's offset).
inline constexpr size_t kStagingAlignment = 64;

// The host side of the staging buffer: hands out blocks to any thread. Holds the mapping's address
// but makes no GL call; only its StagingBuffer, on the context's thread, does.
class StagingArena : public std::enable_shared_from_this<StagingArena> {
 public:
  // A block of at least `bytes`, or an empty one when no run that long is free (or the buffer is
  // gone): the caller then uses host memory of its own. Never waits. Any thread.
  StagingBlock Reserve(size_t bytes);

  size_t capacity() const { return capacity_; }
  // Bytes held by blocks, and by blocks gone whose uploads the device may still be reading.
  size_t bytes_in_use() const;
  // Reservations refused so far for want of a free run.
  uint64_t refused() const;

  // Made by StagingBuffer only (public for std::make_shared).
  StagingArena(uint8_t* base, size_t capacity);

 private:
  friend class StagingBlock;
  friend class StagingBuffer;
  struct Held {
    size_t size = 0;
    GLsync fence = nullptr;  // the last upload from it; deleted on the context's thread
  };
  void Release(size_t offset);
  void Free(size_t offset, size_t size);  // REQUIRES: mu_ held

  uint8_t* const base_;
  const size_t capacity_;
  mutable std::mutex mu_;
  bool closed_ = false;
  std::map<size_t, size_t> free_;              // offset -> size, coalesced
  std::map<size_t, Held> held_;                // blocks alive, by offset
  std::vector<std::pair<size_t, Held>> gone_;  // blocks destroyed, their fences not yet seen
  size_t in_use_ = 0;
  uint64_t refused_ = 0;
};

// The GL side: the buffer itself, owned by the Context (Context::staging()). REQUIRES: every
// method, and the destructor, on the context's thread.
class StagingBuffer {
 public:
  // A buffer of `bytes` (rounded up to kStagingAlignment), persistently mapped for writing and
  // reading; an error where the driver refuses it. REQUIRES: GL_ARB_buffer_storage.
  static absl::StatusOr<std::unique_ptr<StagingBuffer>> Create(size_t bytes);
  // Closes the arena (later reservations are refused) and deletes the buffer. Blocks still held
  // then must not be touched again: the context's owner drains its callers before.
  ~StagingBuffer();
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  const std::shared_ptr<StagingArena>& arena() const { return arena_; }
  GLuint buffer() const { return buffer_; }

  // After commands that read `block` (an upload from it): a fence, so that its bytes are not
  // handed out again before the device has read them.
  void Read(const StagingBlock& block);
  // Frees the bytes of blocks gone whose fences have signalled. Cheap; call between jobs.
  void Reclaim();
  // Blocks still held (for the owner's shutdown check).
  size_t blocks_held() const;

 private:
  StagingBuffer(GLuint buffer, std::shared_ptr<StagingArena> arena)
      : buffer_(buffer), arena_(std::move(arena)) {}
  GLuint buffer_ = 0;
  std::shared_ptr<StagingArena> arena_;
};

}  // namespace glimpse::gpu

#endif  // GLIMPSE_GPU_STAGING_H_

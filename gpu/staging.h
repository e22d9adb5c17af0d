// Staging memory: host memory the device uploads textures from as it is, so that an image's pixels
// reach the device through one copy. Persistently mapped pixel-unpack buffers
// (GL_ARB_buffer_storage, core since GL 4.4), mapped in slabs of kStagingSlabBytes as large
// images arrive, up to a limit, are carved into blocks: a host thread (a decoder)
// reserves a block and writes an image's rows into it, laid out as the upload takes them
// (StagedRowsFor); the context's thread then fills the image's texture from the block
// (Image::Upload) with no copy of its own on the host. A block's bytes are reused once the block
// is gone and the device has finished reading them: each upload leaves a fence, checked on the
// context's thread (StagingBuffer::Reclaim). When no block is free the caller uses ordinary host
// memory, as without staging: a reservation never waits. Nothing is mapped until a reservation
// finds no room; the context's thread then maps another slab (Reclaim), up to the limit, so that
// a server that never sees a large image holds none.
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
  // The slab (staging buffer) it lies in, and where in it it starts (a multiple of
  // kStagingAlignment).
  size_t slab() const { return slab_; }
  size_t offset() const { return offset_; }
  // Whether the block was carved from `arena`.
  bool from(const StagingArena& arena) const { return arena_.get() == &arena; }

 private:
  friend class StagingArena;
  StagingBlock(std::shared_ptr<StagingArena> arena, size_t slab, size_t offset, size_t size,
               uint8_t* data)
      : arena_(std::move(arena)), slab_(slab), offset_(offset), size_(size), data_(data) {}
  void Release();

  std::shared_ptr<StagingArena> arena_;
  size_t slab_ = 0, offset_ = 0, size_ = 0;
  uint8_t* data_ = nullptr;
};

// Blocks are aligned to cache lines (and so to any texel's size, as GL wants of an unpack
// buffer's offset).
inline constexpr size_t kStagingAlignment = 64;
// Staging memory is mapped this much at a time (or one larger image's worth).
inline constexpr size_t kStagingSlabBytes = size_t{32} << 20;

// The host side of staging memory: hands out blocks to any thread. Holds the slabs' addresses but
// makes no GL call; only its StagingBuffer, on the context's thread, does.
class StagingArena : public std::enable_shared_from_this<StagingArena> {
 public:
  // A block of at least `bytes`, or an empty one when no mapped slab has a free run that long (or
  // the buffer is gone): the caller then uses host memory of its own, and the context's thread
  // maps more at its next Reclaim while the limit allows. Never waits. Any thread.
  StagingBlock Reserve(size_t bytes);

  // The most it maps (ContextOptions::staging_bytes), and what it has mapped so far.
  size_t limit() const { return limit_; }
  size_t mapped() const;
  // Bytes held by blocks, and by blocks gone whose uploads the device may still be reading.
  size_t bytes_in_use() const;
  // Reservations refused so far for want of a free run.
  uint64_t refused() const;

  // Made by StagingBuffer, or over host memory of the caller's for tests of the bookkeeping (a
  // slab added with AddSlab). Public for std::make_shared.
  explicit StagingArena(size_t limit) : limit_(limit) {}
  // Adds `capacity` bytes at `base` as a slab of their own; false past the limit.
  bool AddSlab(uint8_t* base, size_t capacity);

 private:
  friend class StagingBlock;
  friend class StagingBuffer;
  struct Held {
    size_t size = 0;
    GLsync fence = nullptr;  // the last upload from it; deleted on the context's thread
  };
  struct Slab {
    uint8_t* base = nullptr;
    size_t capacity = 0;
    std::map<size_t, size_t> free;  // offset -> size, coalesced
    std::map<size_t, Held> held;    // blocks alive, by offset
  };
  struct Gone {
    size_t slab = 0, offset = 0;
    Held held;
  };
  void Release(size_t slab, size_t offset);
  void Free(size_t slab, size_t offset, size_t size);  // REQUIRES: mu_ held

  const size_t limit_;
  mutable std::mutex mu_;
  bool closed_ = false;
  std::vector<Slab> slabs_;
  size_t mapped_ = 0;
  std::vector<Gone> gone_;  // blocks destroyed, their fences not yet seen
  size_t in_use_ = 0;
  uint64_t refused_ = 0;
  size_t wanted_ = 0;  // the largest reservation refused since the last slab was added
};

// The GL side: the slabs' buffers, owned by the Context (Context::staging()). REQUIRES: every
// method, and the destructor, on the context's thread.
class StagingBuffer {
 public:
  // Staging memory of at most `limit` bytes, none of it mapped yet. UNAVAILABLE without
  // GL_ARB_buffer_storage.
  static absl::StatusOr<std::unique_ptr<StagingBuffer>> Create(size_t limit);
  // Closes the arena (later reservations are refused) and deletes the buffers. Blocks still held
  // then must not be touched again: the context's owner drains its callers before.
  ~StagingBuffer();
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  const std::shared_ptr<StagingArena>& arena() const { return arena_; }
  // The buffer of `block`'s slab. REQUIRES: block comes from this arena.
  GLuint buffer(const StagingBlock& block) const { return buffers_[block.slab()]; }

  // After commands that read `block` (an upload from it): a fence, so that its bytes are not
  // handed out again before the device has read them.
  void Read(const StagingBlock& block);
  // Frees the bytes of blocks gone whose fences have signalled, and maps another slab where a
  // reservation found no room and the limit allows: kStagingSlabBytes, or the refused size if
  // larger, or what the limit has left if less (a quarter slab at least). Cheap; call between
  // jobs.
  void Reclaim();
  // On the context's thread: a block of `bytes`, reclaiming and mapping more first where none is
  // free (as the worker does between jobs); empty past the limit.
  StagingBlock Reserve(size_t bytes);
  // Blocks still held (for the owner's shutdown check).
  size_t blocks_held() const;

 private:
  explicit StagingBuffer(std::shared_ptr<StagingArena> arena) : arena_(std::move(arena)) {}
  // Maps a slab of `bytes`; false (logged once) where the driver refuses it.
  bool MapSlab(size_t bytes);

  std::shared_ptr<StagingArena> arena_;
  std::vector<GLuint> buffers_;  // one per slab, in the arena's order
  bool refused_by_driver_ = false;
};

}  // namespace glimpse::gpu

#endif  // GLIMPSE_GPU_STAGING_H_

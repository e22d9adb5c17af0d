// Results back from device buffers into host memory, a piece at a time, by one of three paths:
//
//   Readback& back = ctx.readback();  // the path DeviceLimits::read_path names
//   if (!back.Read(table, bytes, piece, [&](const uint8_t* data, size_t at, size_t n) {
//         return Consume(data, at, n);  // false stops the read
//       })) {
//     return ctx.MapError("the table");
//   }
#ifndef GLIMPSE_GPU_READBACK_H_
#define GLIMPSE_GPU_READBACK_H_

#include <absl/functional/function_ref.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "gpu/gl_handles.h"

namespace glimpse::gpu {

// How a device buffer's bytes reach host memory.
enum class ReadPath {
  // Through one mapping of the buffer, read in place: CPU renderers, whose buffers are host
  // memory.
  kMapped,
  // Copied out by the driver (glGetBufferSubData) into host memory, a piece at a time.
  kCopied,
  // Copied by the device (glCopyBufferSubData) into host memory of the driver's, cached and
  // mapped once (GL_CLIENT_STORAGE_BIT, persistent), in chunks that take turns between two
  // halves, so that the next chunk's copy runs while the caller reads this one; read in place.
  // GPUs: on an H100 (driver 580) a mapping of device memory read at 0.7-3.7 GB/s and the
  // driver's copy at about 3 GB/s (bench/results/nvidia_h100.md), where the link moves 20+.
  kPinned,
};
std::string_view ReadPathName(ReadPath path);  // "mapped", "copied", "pinned"

// The context's read-backs: the path and the host memory each one needs, kept for the next.
// REQUIRES: every method, and the destructor, on the context's thread.
class Readback {
 public:
  // Receives `bytes` bytes at `data`, which are the buffer's from offset `at`; valid until it
  // returns. False stops the read.
  using Use = absl::FunctionRef<bool(const uint8_t* data, size_t at, size_t bytes)>;

  explicit Readback(ReadPath path) : path_(path) {}
  ~Readback();
  Readback(const Readback&) = delete;
  Readback& operator=(const Readback&) = delete;

  ReadPath path() const { return path_; }

  // The first `size` bytes of `src`, in order, in pieces of `piece` bytes (the last may be
  // shorter), each handed to `use`; shader writes issued before the call are included. False
  // where the GL failed (a mapping refused, a fence that could not be waited for: the GL error
  // is left for Context::MapError to name); true otherwise, also when `use` stopped it.
  bool Read(const Buffer& src, size_t size, size_t piece, Use use);
  // The first `size` bytes of `src` into `out`, whole (the pinned halves stay at their chunk
  // size whatever `size` is).
  bool ReadAll(const Buffer& src, size_t size, void* out);

  // Host memory the kPinned path has mapped so far: two chunks once it has read anything, each
  // 8 MiB (or a few bytes less: whole pieces) unless a read asked for pieces larger than that.
  size_t pinned_bytes() const { return 2 * chunk_; }

 private:
  bool ReadPinned(const Buffer& src, size_t size, size_t piece, Use use);
  // Maps two chunks of at least `chunk` bytes each, if not yet as large.
  bool EnsurePinned(size_t chunk);
  // Unmaps and deletes the pinned buffer, if any.
  void ReleasePinned();

  ReadPath path_;
  std::vector<uint8_t> copied_;  // kCopied: one piece
  GlBuffer pinned_;              // kPinned: two chunks, mapped at pinned_data_
  const uint8_t* pinned_data_ = nullptr;
  size_t chunk_ = 0;
};

}  // namespace glimpse::gpu

#endif  // GLIMPSE_GPU_READBACK_H_

#include "gpu/readback.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace glimpse::gpu {
namespace {

// The pinned path's chunk: large enough that a fence per chunk costs nothing against its copy
// (8 MiB at 20 GB/s is 0.4 ms), small enough that the two stay cheap to keep mapped.
constexpr size_t kPinnedChunkBytes = size_t{8} << 20;

// Waits for `fence` (flushing the commands before it), then deletes it. False where the wait
// failed (the GL raised an error).
bool WaitAndDelete(GLsync fence) {
  for (;;) {
    const GLenum r = glClientWaitSync(fence, GL_SYNC_FLUSH_COMMANDS_BIT, GLuint64{1000000000});
    if (r == GL_ALREADY_SIGNALED || r == GL_CONDITION_SATISFIED || r == GL_WAIT_FAILED) {
      glDeleteSync(fence);
      return r != GL_WAIT_FAILED;
    }
  }
}

}  // namespace

std::string_view ReadPathName(ReadPath path) {
  switch (path) {
    case ReadPath::kMapped:
      return "mapped";
    case ReadPath::kCopied:
      return "copied";
    case ReadPath::kPinned:
      break;
  }
  return "pinned";
}

Readback::~Readback() { ReleasePinned(); }

void Readback::ReleasePinned() {
  if (pinned_data_ != nullptr) {
    glBindBuffer(GL_COPY_WRITE_BUFFER, pinned_.get());
    glUnmapBuffer(GL_COPY_WRITE_BUFFER);
    glBindBuffer(GL_COPY_WRITE_BUFFER, 0);
  }
  pinned_ = GlBuffer();
  pinned_data_ = nullptr;
  chunk_ = 0;
}

bool Readback::Read(const Buffer& src, size_t size, size_t piece, Use use) {
  piece = std::max<size_t>(piece, 1);
  // Shader writes before the read, for a mapping, the driver's copy and the device's alike.
  glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
  switch (path_) {
    case ReadPath::kMapped:
      return src.ReadMapped(0, size, [&](const uint8_t* p) {
        for (size_t at = 0; at < size && use(p + at, at, std::min(piece, size - at)); at += piece) {
        }
      });
    case ReadPath::kCopied:
      if (copied_.size() < std::min(piece, size)) copied_.resize(std::min(piece, size));
      for (size_t at = 0; at < size; at += piece) {
        const size_t n = std::min(piece, size - at);
        src.Read(at, n, copied_.data());
        if (!use(copied_.data(), at, n)) break;
      }
      return true;
    case ReadPath::kPinned:
      break;
  }
  return ReadPinned(src, size, piece, use);
}

bool Readback::ReadAll(const Buffer& src, size_t size, void* out) {
  if (path_ == ReadPath::kCopied) {  // straight into `out`
    glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
    src.Read(0, size, out);
    return true;
  }
  // In chunk-sized pieces: one piece of the whole would grow the pinned halves to it, for good.
  auto* to = static_cast<uint8_t*>(out);
  return Read(src, size, kPinnedChunkBytes, [&](const uint8_t* data, size_t at, size_t n) {
    std::memcpy(to + at, data, n);
    return true;
  });
}

bool Readback::EnsurePinned(size_t chunk) {
  if (chunk_ >= chunk) return true;
  ReleasePinned();
  pinned_ = GlBuffer::Create();
  glBindBuffer(GL_COPY_WRITE_BUFFER, pinned_.get());
  const GLbitfield access = GL_MAP_READ_BIT | GL_MAP_PERSISTENT_BIT | GL_MAP_COHERENT_BIT;
  glBufferStorage(GL_COPY_WRITE_BUFFER, GLsizeiptr(2 * chunk), nullptr,
                  access | GL_CLIENT_STORAGE_BIT);
  pinned_data_ = static_cast<const uint8_t*>(
      glMapBufferRange(GL_COPY_WRITE_BUFFER, 0, GLsizeiptr(2 * chunk), access));
  glBindBuffer(GL_COPY_WRITE_BUFFER, 0);
  if (pinned_data_ == nullptr) {
    ReleasePinned();
    return false;
  }
  chunk_ = chunk;
  return true;
}

bool Readback::ReadPinned(const Buffer& src, size_t size, size_t piece, Use use) {
  if (size == 0) return true;
  // Whole pieces per chunk, so that every piece lies in one chunk.
  const size_t chunk = piece * std::max<size_t>(1, kPinnedChunkBytes / piece);
  if (!EnsurePinned(chunk)) return false;
  const size_t chunks = (size + chunk - 1) / chunk;
  GLsync fences[2] = {nullptr, nullptr};
  // The device copies chunk k into half k % 2 of the pinned buffer.
  auto copy = [&](size_t k) {
    glBindBuffer(GL_COPY_READ_BUFFER, src.get());
    glBindBuffer(GL_COPY_WRITE_BUFFER, pinned_.get());
    glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, GLintptr(k * chunk),
                        GLintptr((k % 2) * chunk_), GLsizeiptr(std::min(chunk, size - k * chunk)));
    glBindBuffer(GL_COPY_READ_BUFFER, 0);
    glBindBuffer(GL_COPY_WRITE_BUFFER, 0);
    fences[k % 2] = glFenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0);
  };
  copy(0);
  bool ok = true, more = true;
  for (size_t k = 0; k < chunks && ok; ++k) {
    if (more && k + 1 < chunks) copy(k + 1);  // runs while this chunk is read
    ok = WaitAndDelete(std::exchange(fences[k % 2], nullptr));
    const uint8_t* half = pinned_data_ + (k % 2) * chunk_;
    const size_t end = std::min(chunk, size - k * chunk);
    for (size_t at = 0; ok && more && at < end; at += piece) {
      more = use(half + at, k * chunk + at, std::min(piece, end - at));
    }
    if (!more) break;
  }
  // A copy issued ahead of a stop or a failure: waited for, so that the next read's copy into
  // the same half cannot be overtaken by this one's fence.
  for (GLsync& f : fences) {
    if (f != nullptr) ok = WaitAndDelete(std::exchange(f, nullptr)) && ok;
  }
  return ok;
}

}  // namespace glimpse::gpu

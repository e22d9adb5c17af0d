// The host memory that results may hold while they wait for their readers (--result-buffer-bytes).
// The GPU worker takes a lease before it produces a result and never waits for a reader; the
// lease is given back as the messages are sent, or at once when the reader goes away. A result
// larger than a part (an integral table) is produced a part at a time as the reader consumes it.
//
//   ResultBuffer results(uint64_t{256} << 20);
//   if (std::optional<Lease> lease = results.TryAcquire(result_bytes)) {
//     // ... produce the result; give back what it turned out not to need:
//     lease->ShrinkTo(used_bytes);
//     // Freed as the messages are sent (at once if the reader has gone):
//     if (absl::Status s = call->Send(std::move(messages), *std::move(lease)); !s.ok()) return s;
//   }  // else not free now: the job stays queued, nothing waits
#ifndef GLIMPSE_SERVER_STORE_RESULT_BUFFER_H_
#define GLIMPSE_SERVER_STORE_RESULT_BUFFER_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>

namespace glimpse::server {

class ResultBuffer;

// Bytes held against the budget; given back when destroyed. Move-only.
class Lease {
 public:
  Lease() = default;
  Lease(Lease&& other) noexcept { *this = std::move(other); }
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() { Release(); }

  uint64_t bytes() const { return bytes_; }
  // Gives back what the result turned out not to need. REQUIRES: bytes <= this->bytes().
  void ShrinkTo(uint64_t bytes);
  void Release();

 private:
  friend class ResultBuffer;
  Lease(ResultBuffer* budget, uint64_t bytes) : budget_(budget), bytes_(bytes) {}
  ResultBuffer* budget_ = nullptr;
  uint64_t bytes_ = 0;
};

struct ResultBufferUsage {
  uint64_t budget = 0, used = 0, peak = 0;
};

// Thread-safe.
class ResultBuffer {
 public:
  explicit ResultBuffer(uint64_t budget_bytes) : budget_(budget_bytes) {}

  // A lease of `bytes` if that many are free now; nullopt otherwise (never waits).
  std::optional<Lease> TryAcquire(uint64_t bytes);
  // Called (without the budget's lock) whenever bytes are given back.
  void SetOnRelease(std::function<void()> on_release);

  uint64_t budget() const { return budget_; }
  // The largest part one streamed result takes at a time: an eighth of the budget, so a few
  // stalled readers cannot hold all of it.
  uint64_t part_bytes() const { return budget_ / 8; }
  ResultBufferUsage Usage() const;

 private:
  friend class Lease;
  void Give(uint64_t bytes);

  const uint64_t budget_;
  mutable std::mutex mu_;
  uint64_t used_ = 0, peak_ = 0;
  std::function<void()> on_release_;
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_STORE_RESULT_BUFFER_H_

// The host allocator's hold on freed memory. The server's large buffers come and go per call
// (upload bytes, decoded pixels, llvmpipe's textures and their packed copies, result messages):
// glibc serves them from per-thread arenas once its dynamic mmap threshold has risen past their
// size (it rises to the largest block freed, up to 32 MiB), and an arena returns memory to the
// system only from its top, so the resident size grew with every new mix of sizes and threads
// (bench/results/soak_llvmpipe.md). A fixed threshold bounds what the arenas see.
//
//   int main(int argc, char** argv) {
//     // First, before any other thread starts:
//     if (!glimpse::server::KeepLargeBlocksOutOfArenas(flags.arena_keep_bytes)) {
//       spdlog::warn("the allocator refused a fixed mmap threshold");
//     }
//     // ... then the server's threads.
//   }
//   // Later, on a thread that has been idle a while (the GPU worker's loop):
//   ReleaseFreeHostMemory();
#ifndef GLIMPSE_SERVER_HOST_MEMORY_H_
#define GLIMPSE_SERVER_HOST_MEMORY_H_

#include <cstddef>
#include <cstdint>

namespace glimpse::server {

// Blocks of at least this many bytes are mapped on their own and unmapped when freed; smaller ones
// come from the arenas. 8 MiB takes in what most calls bring: an inline photo's bytes (a 1080p
// PNG, 3.6 MB), a raw 1080p RGB array (6.2 MB), a PNG's inflated rows, a 1080p image decoded
// where staging memory had no room, so that each reuses pages already faulted in instead of
// faulting in (and zeroing) a fresh page per 4 KiB on every call; 4K images and larger are still
// mapped and handed back each time. Against 1 MiB: a 1080p PNG's decode 20.2-20.4 ms against
// 24.8-26.1 ms, its server CPU per call 30.1-30.3 ms against 32.8-33.1; a 6-minute soak's
// resident memory under load 5% higher, and lower once idle (bench/results/soak_llvmpipe.md).
inline constexpr size_t kOwnMappingBytes = size_t{8} << 20;

// The free memory each allocator arena keeps at its top instead of handing it back at once
// (glibc's trim threshold; --arena-keep-bytes). Blocks under kOwnMappingBytes that come and go
// with every call (streamed result messages and the serialized copies gRPC makes of them) then
// reuse pages already faulted in: handed back, they cost a page fault per 4 KiB afresh on
// every call, on the GL thread among others (bench/results/e2e_llvmpipe.md). glibc keeps it
// while the process lives: malloc_trim does not shrink the top of a thread's arena, so a server
// holds up to this much more per arena its large results have passed through (about 90 MB over
// 8 soak clients, bench/results/soak_llvmpipe.md). 0 hands freed memory back at once.
inline constexpr size_t kArenaKeepBytes = size_t{32} << 20;

// Fixes glibc's mmap threshold at kOwnMappingBytes (turning off its dynamic rise) and its trim
// threshold at `arena_keep_bytes` (at most 1 GiB). Call once at start-up, before other threads
// start. False if the allocator refused (not glibc).
bool KeepLargeBlocksOutOfArenas(size_t arena_keep_bytes = kArenaKeepBytes);

// Host memory for a buffer that lives within one call (a turned image's pixels as the file
// stores them, before they are turned into place). Under kOwnMappingBytes it comes from the
// allocator's arenas, whose freed pages are reused without faults; from there up, from a mapping
// of its own marked for transparent huge pages (MADV_HUGEPAGE; used where the system's
// /sys/kernel/mm/transparent_hugepage/enabled says madvise or always), which faults in 2 MiB at a
// time: 33 MB written afresh in 4.5 ms against 32 ms in 4 KiB pages (one 2-core VM), about the
// time of writing memory already mapped. Its bytes are left as they are (not zeroed).
class ScratchBlock {
 public:
  explicit ScratchBlock(size_t bytes);
  ~ScratchBlock();
  ScratchBlock(const ScratchBlock&) = delete;
  ScratchBlock& operator=(const ScratchBlock&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // the mapping's length; 0: from the allocator
};

// Hands the free pages inside the allocator's arenas back to the system (glibc malloc_trim).
// Costs a walk over the free lists: call when idle, not per call.
void ReleaseFreeHostMemory();

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_HOST_MEMORY_H_

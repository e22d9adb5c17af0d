#include "server/host_memory.h"

#include <malloc.h>
#include <sys/mman.h>

#include <new>

namespace glimpse::server {

bool KeepLargeBlocksOutOfArenas(size_t arena_keep_bytes) {
#if defined(__GLIBC__)
  return mallopt(M_MMAP_THRESHOLD, int(kOwnMappingBytes)) == 1 &&
         arena_keep_bytes <= size_t{1} << 30 &&
         mallopt(M_TRIM_THRESHOLD, int(arena_keep_bytes)) == 1;
#else
  return false;
#endif
}

ScratchBlock::ScratchBlock(size_t bytes) : size_(bytes) {
  if (bytes < kOwnMappingBytes) {
    data_ = new uint8_t[bytes];
    return;
  }
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t length = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  // Advice only: without transparent huge pages the mapping faults in 4 KiB pages as before.
  (void)madvise(p, length, MADV_HUGEPAGE);
  data_ = static_cast<uint8_t*>(p);
  mapped_ = length;
}

ScratchBlock::~ScratchBlock() {
  if (mapped_ != 0) {
    munmap(data_, mapped_);
  } else {
    delete[] data_;
  }
}

void ReleaseFreeHostMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace glimpse::server

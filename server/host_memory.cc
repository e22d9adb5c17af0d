#include "server/host_memory.h"

#include <malloc.h>

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

void ReleaseFreeHostMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace glimpse::server

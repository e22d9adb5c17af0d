#include "server/host_memory.h"

#include <malloc.h>

namespace glimpse::server {

bool KeepLargeBlocksOutOfArenas() {
#if defined(__GLIBC__)
  return mallopt(M_MMAP_THRESHOLD, int(kOwnMappingBytes)) == 1;
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

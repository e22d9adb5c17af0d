// The allocator's settings (server/host_memory.h), checked by the page faults a thread takes
// when it allocates, fills and frees the same blocks twice: blocks under kOwnMappingBytes reuse
// pages already faulted in while the arenas keep freed memory, and are faulted in afresh when
// they hand it back at once; blocks of kOwnMappingBytes and more are mappings of their own.
#include "server/host_memory.h"

#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "server/rpc/limits.h"

namespace glimpse::testing {
namespace {

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define GLIMPSE_SANITIZER_ALLOCATOR 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GLIMPSE_SANITIZER_ALLOCATOR 1
#endif

// The minor page faults of the second of two rounds, on a new thread, each round allocating
// `blocks` blocks of `bytes`, writing every byte, then freeing them all.
long SecondRoundFaults(size_t bytes, int blocks) {
  long faults = -1;
  std::thread t([&] {
    auto round = [&] {
      std::vector<char*> held;
      for (int i = 0; i < blocks; ++i) {
        char* p = static_cast<char*>(std::malloc(bytes));
        if (p == nullptr) std::abort();
        std::memset(p, i + 1, bytes);
        asm volatile("" : : "r"(p) : "memory");  // the writes happen
        held.push_back(p);
      }
      for (char* p : held) std::free(p);
    };
    round();
    rusage before{}, after{};
    getrusage(RUSAGE_THREAD, &before);
    round();
    getrusage(RUSAGE_THREAD, &after);
    faults = after.ru_minflt - before.ru_minflt;
  });
  t.join();
  return faults;
}

class HostMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef GLIMPSE_SANITIZER_ALLOCATOR
    GTEST_SKIP() << "a sanitizer's allocator replaces glibc's, whose settings this checks";
#endif
  }
  // Pages in `blocks` blocks of `bytes`.
  static long Pages(size_t bytes, int blocks) {
    return long(bytes / size_t(sysconf(_SC_PAGESIZE))) * blocks;
  }
};

TEST_F(HostMemoryTest, KeptArenaMemoryIsReusedWithoutFaults) {
  ASSERT_TRUE(server::KeepLargeBlocksOutOfArenas());
  // A 1080p RGB image's worth of result messages (server/rpc/limits.h).
  const size_t bytes = server::kResultChunkBytes;
  const int blocks = 12;
  const long faults = SecondRoundFaults(bytes, blocks);
  EXPECT_LT(faults, Pages(bytes, blocks) / 50) << "of " << Pages(bytes, blocks) << " pages";
}

TEST_F(HostMemoryTest, NothingKeptFaultsEveryRoundAfresh) {
  ASSERT_TRUE(server::KeepLargeBlocksOutOfArenas(0));
  const size_t bytes = server::kResultChunkBytes;
  const int blocks = 12;
  const long faults = SecondRoundFaults(bytes, blocks);
  // glibc hands back what coalesces into the top of the arena (here 352 of the 1536 pages).
  EXPECT_GT(faults, Pages(bytes, blocks) / 8) << "of " << Pages(bytes, blocks) << " pages";
  ASSERT_TRUE(server::KeepLargeBlocksOutOfArenas());
}

// A call's inline photo (a 1080p PNG's bytes, its inflated rows) comes from the arenas too, and
// its pages are reused by the next call.
TEST_F(HostMemoryTest, PhotoSizedBlocksReuseArenaPages) {
  ASSERT_TRUE(server::KeepLargeBlocksOutOfArenas());
  const size_t bytes = server::kOwnMappingBytes - (size_t{1} << 20);
  const int blocks = 2;
  const long faults = SecondRoundFaults(bytes, blocks);
  EXPECT_LT(faults, Pages(bytes, blocks) / 50) << "of " << Pages(bytes, blocks) << " pages";
}

// Blocks from kOwnMappingBytes up are mappings of their own (glibc counts them in mallinfo2's
// hblks while held), handed back when freed; smaller ones are not. (Counted, not told by page
// faults: with transparent huge pages a fresh mapping of 8 MiB faults in a 2 MiB page at a time.)
TEST_F(HostMemoryTest, BlocksFromTheThresholdUpAreMappedOnTheirOwn) {
  ASSERT_TRUE(server::KeepLargeBlocksOutOfArenas());
  auto mapped_while_held = [](size_t bytes) {
    const size_t before = mallinfo2().hblks;
    char* p = static_cast<char*>(std::malloc(bytes));
    if (p == nullptr) std::abort();
    asm volatile("" : : "r"(p) : "memory");
    const size_t held = mallinfo2().hblks - before;
    std::free(p);
    EXPECT_EQ(mallinfo2().hblks, before) << bytes << " bytes: its mapping kept after free";
    return held;
  };
  EXPECT_EQ(mapped_while_held(server::kOwnMappingBytes), 1u);
  EXPECT_EQ(mapped_while_held(size_t{33} << 20), 1u);  // a 3840x2160 RGBA image
  EXPECT_EQ(mapped_while_held(server::kOwnMappingBytes - 4096), 0u);
  EXPECT_EQ(mapped_while_held(size_t{1} << 20), 0u);
}

// A ScratchBlock under kOwnMappingBytes comes from the allocator (in its arenas: no mapping of
// its own); from there up it is a mapping of the block's own, which the allocator never sees.
TEST_F(HostMemoryTest, ScratchBlocksFromTheThresholdUpAreTheirOwnMappings) {
  ASSERT_TRUE(server::KeepLargeBlocksOutOfArenas());
  // (Just under the threshold glibc maps a block itself once its own header takes it over:
  // kOwnMappingBytes - 1 is mapped when the arena's top has no room for it.)
  for (size_t bytes : {size_t{1} << 20, server::kOwnMappingBytes - 4096, server::kOwnMappingBytes,
                       size_t{33} << 20}) {
    const size_t before = mallinfo2().hblks, arena_before = mallinfo2().uordblks;
    server::ScratchBlock block(bytes);
    std::memset(block.data(), 0x5A, block.size());
    asm volatile("" : : "r"(block.data()) : "memory");
    EXPECT_EQ(mallinfo2().hblks, before) << bytes;
    if (bytes < server::kOwnMappingBytes) {
      EXPECT_GE(mallinfo2().uordblks, arena_before + bytes) << bytes << " bytes not from an arena";
    } else {
      EXPECT_LT(mallinfo2().uordblks, arena_before + 4096) << bytes << " bytes from an arena";
    }
  }
}

// Every byte of a block of any size can be written and read back (under the sanitizers too).
TEST(ScratchBlockTest, EveryByteIsTheBlocks) {
  for (size_t bytes : {size_t{1}, size_t{4095}, server::kOwnMappingBytes - 1,
                       server::kOwnMappingBytes + 1, (size_t{2} << 20) * 5 + 3}) {
    server::ScratchBlock block(bytes);
    ASSERT_NE(block.data(), nullptr);
    ASSERT_EQ(block.size(), bytes);
    for (size_t i = 0; i < bytes; ++i) block.data()[i] = uint8_t(i * 7);
    size_t wrong = 0;
    for (size_t i = 0; i < bytes; ++i) wrong += block.data()[i] != uint8_t(i * 7);
    EXPECT_EQ(wrong, 0u) << bytes;
  }
}

TEST_F(HostMemoryTest, RefusesToKeepMoreThanAGibibyte) {
  EXPECT_FALSE(server::KeepLargeBlocksOutOfArenas((size_t{1} << 30) + 1));
  ASSERT_TRUE(server::KeepLargeBlocksOutOfArenas());
}

}  // namespace
}  // namespace glimpse::testing

// Staging memory (gpu/staging.h): the arena's blocks, their reuse only once the device has read
// them, and uploads from them (Image::Upload from a block) equal to uploads from host rows.
#include "gpu/staging.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "gpu/box_filter.h"
#include "gpu/context.h"
#include "gpu/histogram.h"
#include "gpu/image.h"
#include "gpu/reference/box_filter.h"
#include "gpu/reference/histogram.h"
#include "tests/gpu_test_env.h"

namespace glimpse::gpu {
namespace {

// An arena over plain host memory, one slab of it: its bookkeeping makes no GL call.
struct HostArena {
  explicit HostArena(size_t bytes) : memory(bytes), arena(std::make_shared<StagingArena>(bytes)) {
    EXPECT_TRUE(arena->AddSlab(memory.data(), bytes));
  }
  std::vector<uint8_t> memory;
  std::shared_ptr<StagingArena> arena;
};

TEST(StagingTest, BlocksAreDisjointAlignedAndComeBackWhole) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  constexpr size_t kCapacity = size_t{1} << 20;
  HostArena host(kCapacity);
  StagingArena& arena = *host.arena;
  std::map<size_t, StagingBlock> live;  // by offset
  uint64_t refused = 0;
  for (int step = 0; step < 4000; ++step) {
    if (!live.empty() && rng() % 2 == 0) {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      live.erase(it);
      continue;
    }
    const size_t want = 1 + rng() % (kCapacity / 8);
    StagingBlock b = arena.Reserve(want);
    if (!b) {
      ++refused;
      continue;
    }
    ASSERT_EQ(b.offset() % kStagingAlignment, 0u);
    ASSERT_GE(b.bytes().size(), want);
    ASSERT_LE(b.offset() + b.bytes().size(), kCapacity);
    ASSERT_EQ(b.bytes().data(), host.memory.data() + b.offset());
    ASSERT_TRUE(b.from(arena));
    auto next = live.lower_bound(b.offset());
    if (next != live.end()) {
      ASSERT_LE(b.offset() + b.bytes().size(), next->first);
    }
    if (next != live.begin()) {
      const StagingBlock& prev = std::prev(next)->second;
      ASSERT_LE(prev.offset() + prev.bytes().size(), b.offset());
    }
    const size_t offset = b.offset();
    live.emplace(offset, std::move(b));
  }
  size_t held = 0;
  for (const auto& [offset, b] : live) held += b.bytes().size();
  EXPECT_EQ(arena.bytes_in_use(), held);
  EXPECT_EQ(arena.refused(), refused);
  EXPECT_GT(refused, 0u) << "the arena never filled up: the test did not reach its limit";
  live.clear();
  EXPECT_EQ(arena.bytes_in_use(), 0u);
  // Every run came back and joined its neighbours: the whole arena is one free run again.
  StagingBlock whole = arena.Reserve(kCapacity);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole.offset(), 0u);
  EXPECT_FALSE(arena.Reserve(1)) << "a full arena handed out another block";
  EXPECT_FALSE(arena.Reserve(0));
}

TEST(StagingTest, ThreadsWriteTheirOwnBlocksOnly) {
  GLIMPSE_SEED_TRACE();
  HostArena host(size_t{4} << 20);
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(testing::TestSeed() + uint64_t(t));
      for (int i = 0; i < 300; ++i) {
        StagingBlock b = host.arena->Reserve(1 + rng() % (size_t{512} << 10));
        if (!b) continue;
        const auto mark = uint8_t(t * 61 + i);
        const std::span<uint8_t> bytes = b.bytes();
        std::memset(bytes.data(), mark, bytes.size());
        std::this_thread::yield();
        // Every byte still `mark`: the first is, and each equals the one after it (one memcmp
        // over the block, not a loop of this file's code, which the sanitizer builds leave
        // unoptimized).
        bad[size_t(t)] += int(bytes[0] != mark ||
                              std::memcmp(bytes.data(), bytes.data() + 1, bytes.size() - 1) != 0);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[size_t(t)], 0) << "thread " << t;
  EXPECT_EQ(host.arena->bytes_in_use(), 0u);
}

TEST(StagingTest, BlocksNeverSpanSlabs) {
  std::vector<uint8_t> a(4096), b(4096);
  auto arena = std::make_shared<StagingArena>(8192);
  ASSERT_TRUE(arena->AddSlab(a.data(), a.size()));
  ASSERT_TRUE(arena->AddSlab(b.data(), b.size()));
  EXPECT_FALSE(arena->AddSlab(b.data(), 64)) << "a slab past the limit was added";
  EXPECT_EQ(arena->mapped(), 8192u);
  StagingBlock first = arena->Reserve(3072), second = arena->Reserve(3072);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first.slab(), 0u);
  EXPECT_EQ(second.slab(), 1u);
  EXPECT_EQ(second.bytes().data(), b.data());
  // 1024 bytes free at the end of each slab: 2048 in all, but no run of 2048.
  EXPECT_FALSE(arena->Reserve(2048));
  EXPECT_TRUE(arena->Reserve(1024));
  first = StagingBlock();
  second = StagingBlock();
  EXPECT_FALSE(arena->Reserve(4097)) << "a block spans two slabs";
  StagingBlock whole = arena->Reserve(4096);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole.bytes().data(), a.data());
}

// Nothing is mapped until a reservation finds no room; Reclaim then maps a slab of
// kStagingSlabBytes (or the refused size, if larger), and at the end what the limit has left.
TEST(StagingTest, SlabsAreMappedAsReservationsFindNoRoomUpToTheLimit) {
  GLIMPSE_REQUIRE_DEVICE();
  constexpr size_t kMiB = size_t{1} << 20;
  testing::OnOwnContext({.staging_bytes = 80 * kMiB}, [&](Context& own) {
    ASSERT_NE(own.staging(), nullptr);
    StagingArena& arena = *own.staging()->arena();
    EXPECT_EQ(arena.limit(), 80 * kMiB);
    EXPECT_EQ(arena.mapped(), 0u);
    EXPECT_FALSE(arena.Reserve(10 * kMiB));
    own.staging()->Reclaim();
    EXPECT_EQ(arena.mapped(), kStagingSlabBytes);
    std::vector<StagingBlock> blocks;
    for (int i = 0; i < 3; ++i) {
      blocks.push_back(arena.Reserve(10 * kMiB));
      ASSERT_TRUE(blocks.back());
      std::memset(blocks.back().bytes().data(), i, blocks.back().bytes().size());
    }
    EXPECT_FALSE(arena.Reserve(10 * kMiB));
    own.staging()->Reclaim();
    EXPECT_EQ(arena.mapped(), 2 * kStagingSlabBytes);
    blocks.push_back(arena.Reserve(10 * kMiB));
    ASSERT_TRUE(blocks.back());
    EXPECT_EQ(blocks.back().slab(), 1u);
    // 16 MiB of the limit left: a refused 40 MiB maps the rest, for smaller images; it stays
    // refused.
    EXPECT_FALSE(arena.Reserve(40 * kMiB));
    own.staging()->Reclaim();
    EXPECT_EQ(arena.mapped(), 80 * kMiB);
    EXPECT_FALSE(arena.Reserve(40 * kMiB));
    own.staging()->Reclaim();
    EXPECT_EQ(arena.mapped(), 80 * kMiB);
    StagingBlock in_second = arena.Reserve(16 * kMiB), last = arena.Reserve(16 * kMiB);
    ASSERT_TRUE(in_second && last);
    EXPECT_EQ(in_second.slab(), 1u);  // 22 MiB were free there
    EXPECT_EQ(last.slab(), 2u);
    EXPECT_FALSE(arena.Reserve(7 * kMiB)) << "blocks overlap or outgrow their slabs";
    EXPECT_EQ(arena.refused(), 5u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(std::count(blocks[size_t(i)].bytes().begin(), blocks[size_t(i)].bytes().end(),
                           uint8_t(i)),
                std::ptrdiff_t(blocks[size_t(i)].bytes().size()))
          << "block " << i << " was written by another";
    }
  });
}

// Uploads from staging memory against uploads from host rows: the same pixels back, the same
// histogram and box filter (equal to the CPU references), on the device's own upload path and on
// the GPU renderers' (plain uploads), for every sample type and channel count, rows that are and
// are not whole 16-byte texels.
TEST(StagingTest, UploadsFromBlocksEqualUploadsFromHostRows) {
  GLIMPSE_REQUIRE_DEVICE();
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  for (bool plain : {false, true}) {
    testing::OnOwnContext(
        {.plain_uploads = plain, .staging_bytes = size_t{16} << 20}, [&](Context& own) {
          ASSERT_NE(own.staging(), nullptr) << "no staging memory on this context";
          // GPUs upload plain textures whatever the option.
          const bool plain_path = own.limits().plain_uploads;
          EXPECT_TRUE(plain_path || !plain);
          StagingArena& arena = *own.staging()->arena();
          HistogramKernel histogram(own);
          BoxFilterKernel box(own);
          for (SampleType t : {SampleType::kUint8, SampleType::kUint16, SampleType::kFloat32}) {
            for (int c = 1; c <= 4; ++c) {
              for (const auto& [w, h] :
                   {std::pair{37, 5}, std::pair{1921, 3}, std::pair{256, 130}}) {
                const ImageDesc d{w, h, c, t};
                SCOPED_TRACE(::testing::Message()
                             << DescribeImage(d) << (plain ? ", plain uploads" : ""));
                const HostImage host = testing::RandomImage(d, rng);
                const StagedRows layout = StagedRowsFor(own.limits(), d);
                EXPECT_GE(layout.row_stride, d.row_bytes());
                EXPECT_EQ(layout.channels, plain_path && c == 3 ? 4 : c);
                if (!plain_path) {
                  EXPECT_EQ(layout.row_stride % 16, 0u);
                }
                StagingBlock block = own.staging()->Reserve(layout.bytes(d));
                ASSERT_TRUE(block);
                std::memset(block.bytes().data(), 0xA5, block.bytes().size());
                StageRows(layout, d, host.data, block.bytes());
                EXPECT_TRUE(UnstageRows(layout, d, block.bytes()) == host.data);
                absl::StatusOr<Image> staged = Image::Upload(own, d, block);
                absl::StatusOr<Image> direct = Image::Upload(own, host);
                ASSERT_TRUE(staged.ok() && direct.ok()) << staged.status() << direct.status();
                block = StagingBlock();  // the image no longer needs the rows
                EXPECT_EQ(staged->has_packed(), !plain_path);
                EXPECT_TRUE(staged->Download().data == host.data);
                if (!plain_path) {
                  EXPECT_TRUE(staged->PackedRows() == direct->PackedRows());
                }
                HistogramOptions ho;
                if (t == SampleType::kFloat32) {
                  ho.lo = -1.0;
                  ho.hi = 2.0;
                }
                auto hs = histogram.Run(*staged, ho);
                auto hr = reference::Histogram(host, ho);
                ASSERT_TRUE(hs.ok() && hr.ok()) << hs.status() << hr.status();
                EXPECT_EQ(hs->counts, hr->counts);
                if (t != SampleType::kFloat32) {
                  const BoxFilterOptions bo{.rx = 2, .ry = 1};
                  auto bs = box.Run(*staged, bo);
                  auto br = reference::BoxFilter(host, bo);
                  ASSERT_TRUE(bs.ok() && br.ok()) << bs.status() << br.status();
                  EXPECT_TRUE(bs->image.Download().data == br->data);
                }
              }
            }
          }
          own.staging()->Reclaim();
          EXPECT_EQ(arena.bytes_in_use(), 0u);
        });
  }
}

// A block the device has read is handed out again only after the context's thread has seen its
// fence (Reclaim); one it never read comes back at once. Blocks of another arena, or too small for
// the image, are refused.
TEST(StagingTest, ReadBlocksComeBackThroughReclaimOnly) {
  GLIMPSE_REQUIRE_DEVICE();
  testing::OnOwnContext({.staging_bytes = size_t{1} << 20}, [&](Context& own) {
    ASSERT_NE(own.staging(), nullptr);
    StagingBuffer& staging = *own.staging();
    StagingArena& arena = *staging.arena();
    const size_t all = arena.limit();
    const ImageDesc d{512, 512, 4, SampleType::kUint8};  // 1 MiB: the whole arena
    ASSERT_EQ(StagedRowsFor(own.limits(), d).bytes(d), all);
    {
      StagingBlock unread = own.staging()->Reserve(all);
      ASSERT_TRUE(unread);
      EXPECT_EQ(arena.mapped(), all);
    }
    StagingBlock block = arena.Reserve(all);
    ASSERT_TRUE(block) << "a block never read did not come back at once";
    std::memset(block.bytes().data(), 7, all);
    absl::StatusOr<Image> image = Image::Upload(own, d, block);
    ASSERT_TRUE(image.ok()) << image.status();
    EXPECT_EQ(staging.blocks_held(), 1u);
    block = StagingBlock();
    EXPECT_EQ(staging.blocks_held(), 0u);
    EXPECT_EQ(arena.bytes_in_use(), all) << "read bytes freed before their fence was seen";
    EXPECT_FALSE(arena.Reserve(all));
    own.Finish();
    staging.Reclaim();
    EXPECT_EQ(arena.bytes_in_use(), 0u);
    StagingBlock again = arena.Reserve(all);
    ASSERT_TRUE(again);
    EXPECT_EQ(image->Download().data, std::vector<uint8_t>(all, 7));

    HostArena other(all);
    StagingBlock foreign = other.arena->Reserve(all);
    absl::StatusOr<Image> refused = Image::Upload(own, d, foreign);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInternal) << refused.status();
    const ImageDesc larger{513, 512, 4, SampleType::kUint8};
    refused = Image::Upload(own, larger, again);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInternal) << refused.status();
  });
}

}  // namespace
}  // namespace glimpse::gpu

// Read-backs by every path (gpu/readback.h): the bytes a GPU copy left in a buffer come back
// whole and in order, in pieces of the asked size at the right offsets, across the pinned path's
// chunks and its two halves, stopped early where the consumer says so, and again after that.
#include "gpu/readback.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gpu/context.h"
#include "tests/gpu_test_env.h"

namespace glimpse::gpu {
namespace {

// `bytes` random bytes in a device buffer, written there by the GPU (a buffer copy).
Buffer Written(const std::vector<uint8_t>& bytes) {
  const Buffer source = Buffer::Create(bytes.size(), bytes.data());
  Buffer written = Buffer::Create(bytes.size());
  glBindBuffer(GL_COPY_READ_BUFFER, source.get());
  glBindBuffer(GL_COPY_WRITE_BUFFER, written.get());
  glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, 0, 0, GLsizeiptr(bytes.size()));
  glBindBuffer(GL_COPY_READ_BUFFER, 0);
  glBindBuffer(GL_COPY_WRITE_BUFFER, 0);
  return written;
}

TEST(ReadbackTest, EveryPathReadsEveryPieceInOrder) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  // 21 MiB and a few bytes: three of the pinned path's 8 MiB chunks, the last partial.
  std::vector<uint8_t> bytes((size_t{21} << 20) + 13);
  for (uint8_t& b : bytes) b = uint8_t(rng());
  const Buffer written = Written(bytes);
  for (ReadPath path : {ReadPath::kMapped, ReadPath::kCopied, ReadPath::kPinned}) {
    Readback readback(path);
    for (size_t piece : {size_t{4096}, size_t{3} << 20, (size_t{1} << 20) + 7, bytes.size() + 1}) {
      SCOPED_TRACE(::testing::Message() << ReadPathName(path) << ", pieces of " << piece);
      std::vector<uint8_t> got(bytes.size(), 0);
      size_t next = 0, calls = 0;
      ASSERT_TRUE(readback.Read(written, bytes.size(), piece,
                                [&](const uint8_t* data, size_t at, size_t n) {
                                  EXPECT_EQ(at, next);
                                  EXPECT_EQ(n, std::min(piece, bytes.size() - at));
                                  std::memcpy(got.data() + at, data, n);
                                  next = at + n;
                                  ++calls;
                                  return true;
                                }));
      EXPECT_EQ(next, bytes.size());
      EXPECT_EQ(calls, (bytes.size() + piece - 1) / piece);
      EXPECT_TRUE(got == bytes) << "the bytes read back differ";
      // Stopped after the second piece; the next read still gets every byte.
      calls = 0;
      ASSERT_TRUE(readback.Read(written, bytes.size(), piece,
                                [&](const uint8_t*, size_t, size_t) { return ++calls < 2; }));
      EXPECT_EQ(calls, std::min<size_t>(2, (bytes.size() + piece - 1) / piece));
      std::vector<uint8_t> again(bytes.size(), 0);
      ASSERT_TRUE(readback.ReadAll(written, bytes.size(), again.data()));
      EXPECT_TRUE(again == bytes);
    }
    // A shorter read than the buffer: its first bytes only.
    std::vector<uint8_t> head(1000, 0);
    ASSERT_TRUE(readback.ReadAll(written, head.size(), head.data()));
    EXPECT_TRUE(std::equal(head.begin(), head.end(), bytes.begin())) << ReadPathName(path);
    if (path == ReadPath::kPinned) {
      // Pieces larger than a chunk (the whole buffer and a byte) grew the halves to them.
      EXPECT_EQ(readback.pinned_bytes(), 2 * (bytes.size() + 1));
    } else {
      EXPECT_EQ(readback.pinned_bytes(), 0u);
    }
  }
  // Whole reads keep the pinned halves at their chunk size, however large.
  Readback fresh(ReadPath::kPinned);
  std::vector<uint8_t> all(bytes.size(), 0);
  ASSERT_TRUE(fresh.ReadAll(written, bytes.size(), all.data()));
  EXPECT_TRUE(all == bytes);
  EXPECT_LE(fresh.pinned_bytes(), size_t{16} << 20);
  EXPECT_TRUE(ctx.CheckGlError("reading back").ok());
}

}  // namespace
}  // namespace glimpse::gpu

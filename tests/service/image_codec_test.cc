// Encoded files whose headers stb_image could not be trusted with (inputs found by tests/fuzz; each
// is also in the fuzz corpus): PNM files still go to stb_image and are checked before it reads
// them; PNG and JPEG files now go to server/ingest/decode_png.cc and libjpeg-turbo. No GPU needed.
#include "server/ingest/image_codec.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace glimpse::server {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(ImageCodecTest, PnmHeaderNumbersPastIntAreRefusedNamingTheField) {
  const std::string kBig = "33333333165535";  // from the fuzz input: 14 digits
  struct Case {
    std::string file, needle;
  };
  const Case cases[] = {
      {"P5\n" + kBig + " 2\n255\n\x01\x02", "width is 33333333165535"},
      {"P5\n# comment\n2 \n" + kBig + "\n\x01\x02\xff\xfe", "height is 33333333165535"},
      {"P6 1 1 " + kBig + "\nabc", "maxval is 33333333165535"},
      // stb_image ends a comment at \r too: the number after it is still read.
      {"P5 #c\r2147483648 1 255\n\x01", "width is 2147483648"},
      // Leading zeros do not make a number big, the digits past INT_MAX's ten do.
      {"P5 1 000000000000000000001 2147483648\n\x01", "maxval is 2147483648"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    absl::StatusOr<gpu::ImageDesc> probed = ProbeEncoded(Bytes(c.file), "image.encoded.data");
    ASSERT_FALSE(probed.ok());
    EXPECT_EQ(probed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(probed.status().message().find("image.encoded.data"), std::string::npos);
    EXPECT_NE(probed.status().message().find(c.needle), std::string::npos)
        << probed.status().message();
    EXPECT_NE(probed.status().message().find("2147483647"), std::string::npos);
    EXPECT_FALSE(DecodeEncoded(Bytes(c.file), 0, uint64_t{1} << 40, "f").ok());
  }
}

TEST(ImageCodecTest, PnmHeaderNumbersUpToIntAreLeftToTheLimits) {
  // INT_MAX itself is read by stb_image without overflow; the pixel limit refuses the size.
  const std::string file = "P5 2147483647 1 255\n\x01";
  absl::StatusOr<gpu::HostImage> decoded = DecodeEncoded(Bytes(file), 0, 1 << 20, "f");
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kResourceExhausted)
      << decoded.status().message();
  EXPECT_NE(decoded.status().message().find("--max-image-pixels"), std::string::npos);

  const std::string small = "P5\n# c\r3 1 0000000255\n\x01\x02\x03";
  decoded = DecodeEncoded(Bytes(small), 0, 1 << 20, "f");
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->desc, (gpu::ImageDesc{3, 1, 1, gpu::SampleType::kUint8}));
  EXPECT_EQ(decoded->data, (std::vector<uint8_t>{1, 2, 3}));
}

// stb_image reads a number missing from a PNM header as 0 and the samples from after the character
// that stands in its place; samples missing from the end it would leave uninitialized.
TEST(ImageCodecTest, PnmHeaderIsReadAsStbImageReadsItAndShortSamplesAreRefused) {
  // From the fuzz input: maxval is "W", so the samples are "1168", 4 of the 42074 needed.
  const std::string cut("P5\n# \n000021037\n2 W1168", 23);
  absl::StatusOr<gpu::HostImage> decoded = DecodeEncoded(Bytes(cut), 3, 1 << 20, "image");
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(decoded.status().message().find("image is a truncated PNM file: its header (21037x2 "
                                            "1-channel uint8) needs 42074 bytes of samples, it "
                                            "has 4"),
            std::string::npos)
      << decoded.status().message();
  // The same reading with all samples there: maxval 0 is 8-bit.
  decoded = DecodeEncoded(Bytes("P5 3 1 x\x01\x02\x03"), 0, 1 << 20, "image");
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->data, (std::vector<uint8_t>{1, 2, 3}));
}

// An empty IDAT chunk is valid PNG; stb_image would read it into a null buffer (UBSan in the
// sanitizer build fails this test without the fix).
TEST(ImageCodecTest, PngWithEmptyIdatChunksDecodesAsWithout) {
  std::mt19937 rng(std::random_device{}());
  const uint32_t seed = rng();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 gen(seed);
  gpu::HostImage img = gpu::HostImage::Zeros({7, 5, 3, gpu::SampleType::kUint8});
  for (uint8_t& b : img.data) b = uint8_t(gen());
  absl::StatusOr<std::string> png = EncodePng(img);
  ASSERT_TRUE(png.ok());
  const size_t idat = png->find("IDAT") - 4;
  const std::string empty_idat("\0\0\0\0IDAT\x35\xaf\x06\x1e", 12);
  // Before the first IDAT, and again before IEND.
  std::string with = *png;
  with.insert(idat, empty_idat);
  with.insert(with.size() - 12, empty_idat);
  for (int channels : {0, 4}) {
    absl::StatusOr<gpu::HostImage> decoded = DecodeEncoded(Bytes(with), channels, 1 << 20, "f");
    absl::StatusOr<gpu::HostImage> plain = DecodeEncoded(Bytes(*png), channels, 1 << 20, "f");
    ASSERT_TRUE(decoded.ok()) << decoded.status().message();
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ(decoded->desc, plain->desc);
    EXPECT_EQ(decoded->data, plain->data);
  }
  absl::StatusOr<gpu::HostImage> decoded = DecodeEncoded(Bytes(with), 0, 1 << 20, "f");
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->data, img.data);

  // Only empty IDATs: nothing to decode, refused with the field's name.
  std::string none = png->substr(0, idat) + empty_idat + png->substr(png->size() - 12);
  absl::StatusOr<gpu::HostImage> refused = DecodeEncoded(Bytes(none), 0, 1 << 20, "image.encoded");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("image.encoded"), std::string::npos);
}

// stb_image would grow its buffer to the stated length before finding the data missing.
TEST(ImageCodecTest, PngChunkLongerThanTheFileIsRefusedBeforeDecoding) {
  absl::StatusOr<std::string> png =
      EncodePng(gpu::HostImage::Zeros({3, 2, 3, gpu::SampleType::kUint8}));
  ASSERT_TRUE(png.ok());
  const size_t idat = png->find("IDAT") - 4;
  for (uint32_t length : {0x7fffffffu, 0x4d000000u, 0xffffffffu}) {
    SCOPED_TRACE(length);
    std::string bad = *png;
    for (int i = 0; i < 4; ++i) bad[idat + size_t(i)] = char(length >> (24 - 8 * i));
    absl::StatusOr<gpu::HostImage> decoded = DecodeEncoded(Bytes(bad), 0, 1 << 20, "upload");
    ASSERT_FALSE(decoded.ok());
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(decoded.status().message().find("upload is a truncated or corrupt PNG file"),
              std::string::npos)
        << decoded.status().message();
    EXPECT_NE(decoded.status().message().find(std::to_string(length)), std::string::npos);
  }
  // Cut inside the last chunk: also refused, before stb_image.
  const std::string cut = png->substr(0, png->size() - 4);
  absl::StatusOr<gpu::HostImage> decoded = DecodeEncoded(Bytes(cut), 0, 1 << 20, "upload");
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("past the file's end"), std::string::npos);
  // Bytes after IEND are not read.
  EXPECT_TRUE(DecodeEncoded(Bytes(*png + "trailing"), 0, 1 << 20, "upload").ok());
}

// stb_image would have written past its 256-code arrays; JPEG files now go to libjpeg-turbo, whose
// own check refuses such a table, after fill bytes before SOI too.
TEST(ImageCodecTest, JpegHuffmanTableOfMoreThan256CodesIsRefused) {
  std::string counts(16, '\0');
  counts[15] = char(257 - 255);
  counts[14] = char(255);
  const size_t length = 2 + 17 + 257;
  std::string bad(
      "\xff\xd8\xff\xfe\x00\x04"
      "ab",
      8);  // a comment segment first
  bad += std::string("\xff\xc4") + char(length >> 8) + char(length & 0xff) + '\x10' + counts;
  bad += std::string(257, '\x01') + "\xff\xd9";
  for (const std::string& file : {bad, "\xff\xff\xff" + bad}) {
    absl::StatusOr<gpu::ImageDesc> probed = ProbeEncoded(Bytes(file), "image.encoded.data");
    ASSERT_FALSE(probed.ok());
    EXPECT_EQ(probed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(probed.status().message().find("image.encoded.data is a truncated or corrupt JPEG "
                                             "file: Bogus Huffman table definition"),
              std::string::npos)
        << probed.status().message();
    EXPECT_FALSE(DecodeEncoded(Bytes(file), 3, 1 << 20, "f").ok());
  }
}

}  // namespace
}  // namespace glimpse::server

// Files the client writes: histogram CSV/JSON, .npy arrays, PNG images, compaction CSV (the
// histogram chart is in chart.h).
#ifndef GLIMPSE_CLIENT_OUTPUT_FILES_H_
#define GLIMPSE_CLIENT_OUTPUT_FILES_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "glimpse/v1/image_analytics.pb.h"

namespace glimpse::client {

// "uint8", "uint16", "float32".
std::string FormatName(v1::SampleFormat f);

// Each returns "" on success, else a message naming the file.
std::string WriteHistogramCsv(const std::string& path, const v1::HistogramResponse& h);
std::string WriteHistogramJson(const std::string& path, const v1::HistogramResponse& h);

// Writes a numpy .npy header for a C-order array; descr like "<u8", "<f8", "|u1", "<u2", "<f4".
std::string WriteNpyHeader(std::FILE* f, const std::string& descr,
                           const std::vector<uint64_t>& shape);
std::string NpyDescr(v1::SampleFormat format);

std::string WritePng(const std::string& path, int width, int height, int channels,
                     const std::string& pixels);

// One line per pixel: x,y,v0[,v1...].
std::string WriteCompactCsv(const std::string& path, v1::SampleFormat format, uint32_t channels,
                            const std::string& xy, const std::string& values);

}  // namespace glimpse::client

#endif  // GLIMPSE_CLIENT_OUTPUT_FILES_H_

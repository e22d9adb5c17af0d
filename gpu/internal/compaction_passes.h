// Internal to gpu/compaction.cc (the API: options, variants, programs, warm-up) and
// gpu/internal/compaction_passes.cc (Run: the passes over the bands, the gather): what both use.
#ifndef GLIMPSE_GPU_INTERNAL_COMPACTION_PASSES_H_
#define GLIMPSE_GPU_INTERNAL_COMPACTION_PASSES_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "gpu/compaction.h"
#include "gpu/context.h"

namespace glimpse::gpu::compaction_internal {

inline constexpr int kThreads = 256;  // invocations per workgroup, every shader
inline constexpr int kTileSide = 16;  // the atomic variants' 16x16 workgroups
// Ordered scan: one 32-bit word of pass bits per invocation.
inline constexpr int kPixelsPerThread = 32;
inline constexpr int64_t kBlockPixels = int64_t{kThreads} * kPixelsPerThread;
// Values per workgroup of the scan passes.
inline constexpr int64_t kScanRun = int64_t{kThreads} * 4;
// Strip scan: pixels per invocation (4 segments of 32), invocations per workgroup.
inline constexpr int kStripGroupPixels = 128;
inline constexpr int kStripThreads = 64;

// Binding points (the shaders' layout(binding = N)).
inline constexpr GLuint kCountersBinding = 0, kIndicesBinding = 1, kDataBinding = 2,
                        kBitsBinding = 3, kSumsBinding = 4, kXyBinding = 5, kValuesBinding = 6;

// Whether a run reads the image's packed form rather than its texture: the strip variant always
// (it is written for that form), every variant on CPU renderers (where uploads make only it).
bool ReadsPacked(const DeviceInfo& device, CompactionVariant variant);
// Whether the strip scan's programs for `desc` take the channel as a define (a program per
// channel) rather than a uniform: 3-byte pixels, whose samples' words and shifts are then
// constants.
bool StripChannelIsDefine(const ImageDesc& desc);
// The programs' defines. packed: the program reads the packed form (ReadsPacked). channel: for
// kChannel (only strip programs where StripChannelIsDefine depend on it).
std::string GatherDefines(SampleType type, int channels, bool packed);
std::string PredicateDefines(SampleType type, CompactionSource source, bool count_only);
std::string StripDefines(const ImageDesc& desc, CompactionSource source, int channel,
                         bool count_only);
std::string FindDefines(CompactionVariant variant, const ImageDesc& desc, CompactionSource source,
                        int channel, bool count_only, bool packed);
std::string ScanDefines();
// The program that finds (or counts) the passing pixels of a band for `variant`.
std::string_view FindProgram(CompactionVariant variant);

// Dispatches `groups` workgroups of a flat 1D shader, folded into 2D past the per-dimension limit.
void DispatchFlat(GLuint program, const DeviceLimits& limits, int64_t groups);

}  // namespace glimpse::gpu::compaction_internal

#endif  // GLIMPSE_GPU_INTERNAL_COMPACTION_PASSES_H_

// The device limits the fuzz targets that run without a GPU check layouts against: those Mesa's
// llvmpipe reports (the CI device), so the accepted sizes are the ones the server accepts there.
#ifndef GLIMPSE_TESTS_FUZZ_FUZZ_DEVICE_H_
#define GLIMPSE_TESTS_FUZZ_FUZZ_DEVICE_H_

#include "gpu/context.h"

namespace glimpse::fuzz {

inline const gpu::DeviceLimits kDevice{
    .max_texture_size = 16384,
    .max_storage_block_bytes = int64_t{128} << 20,
    .max_shared_memory_bytes = 32768,
    .max_invocations = 1024,
    .max_group_count = {65535, 65535, 65535},
    .max_group_size = {1024, 1024, 1024},
    .storage_buffer_offset_alignment = 16,
    .int64 = true,
};

}  // namespace glimpse::fuzz

#endif  // GLIMPSE_TESTS_FUZZ_FUZZ_DEVICE_H_

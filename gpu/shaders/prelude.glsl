// Shared by every Glimpse compute shader; prepended after the #version line and the defines.
// The input image is bound to texture unit 0 and read with texelFetch (exact, no filtering).
#if defined(PACKED_IMAGE)
// Or, for programs written for the texture that run where an upload makes only the image's packed
// form (CPU renderers: gpu/image.h), from that form at image unit 0: the rows' raw bytes, 16 per
// RGBA32UI texel, read a sample at a time. Needs CHANNELS and SAMPLE_BITS.
layout(binding = 0, rgba32ui) readonly uniform uimage2D u_packed;
// The samples' bits of pixel p, channels past CHANNELS zero.
uvec4 packed_bits(ivec2 p) {
  uvec4 t = uvec4(0u);
  for (int c = 0; c < CHANNELS; ++c) {
    uint bit = uint(p.x * CHANNELS + c) * uint(SAMPLE_BITS);
    uint w = imageLoad(u_packed, ivec2(int(bit >> 7), p.y))[(bit >> 5) & 3u];
#if SAMPLE_BITS < 32
    t[c] = bitfieldExtract(w, int(bit & 31u), SAMPLE_BITS);
#else
    t[c] = w;
#endif
  }
  return t;
}
#if defined(FMT_UINT)
uvec4 load_texel(ivec2 p) { return packed_bits(p); }
#else
vec4 load_texel(ivec2 p) { return uintBitsToFloat(packed_bits(p)); }
#endif
#elif defined(FMT_UINT)
layout(binding = 0) uniform usampler2D u_image;
uvec4 load_texel(ivec2 p) { return texelFetch(u_image, p, 0); }
#elif defined(FMT_FLOAT)
layout(binding = 0) uniform sampler2D u_image;
vec4 load_texel(ivec2 p) { return texelFetch(u_image, p, 0); }
#endif

#if defined(HAVE_INT64)
// A texel of four 32-bit words as two 64-bit components, for storage buffers declared so: llvmpipe
// runs a storage-buffer store as a loop over the SIMD lanes, one scalar store per component and
// lane, so two 64-bit components take half the scalar stores of four 32-bit ones.
u64vec2 as_u64_pair(uvec4 v) { return u64vec2(packUint2x32(v.xy), packUint2x32(v.zw)); }
#endif

// OpenCV's COLOR_RGB2GRAY for integer data: (9798 R + 19235 G + 3735 B + 16384) >> 15.
uint luma_u(uvec3 rgb) { return (9798u * rgb.r + 19235u * rgb.g + 3735u * rgb.b + 16384u) >> 15; }

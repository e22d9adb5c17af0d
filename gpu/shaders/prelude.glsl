// Shared by every Glimpse compute shader; prepended after the #version line and the defines.
// The input image is bound to texture unit 0 and read with texelFetch (exact, no filtering).
#if defined(FMT_UINT)
layout(binding = 0) uniform usampler2D u_image;
uvec4 load_texel(ivec2 p) { return texelFetch(u_image, p, 0); }
#elif defined(FMT_FLOAT)
layout(binding = 0) uniform sampler2D u_image;
vec4 load_texel(ivec2 p) { return texelFetch(u_image, p, 0); }
#endif

// OpenCV's COLOR_RGB2GRAY for integer data: (9798 R + 19235 G + 3735 B + 16384) >> 15.
uint luma_u(uvec3 rgb) { return (9798u * rgb.r + 19235u * rgb.g + 3735u * rgb.b + 16384u) >> 15; }

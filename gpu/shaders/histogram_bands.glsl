// For the variants that read the plain texture with texelFetch (global_atomics, shared_per_thread):
// the texture is an atlas of one or more images of the same format, stacked, each starting at a
// row that is a multiple of 64 (the tile side), so that every workgroup lies in one image. A
// single image is an atlas of one. Per 64-row band of the atlas: the band's image's first atlas
// row, width, height and index in the atlas; each image counts into its own histograms,
// counts[index][u_hists][u_bins].
layout(std430, binding = 3) readonly buffer Bands { ivec4 bands[]; };

int band_y0(ivec4 band) { return band.x; }
ivec2 band_size(ivec4 band) { return band.yz; }
int band_counts_base(ivec4 band) { return band.w * u_hists * u_bins; }

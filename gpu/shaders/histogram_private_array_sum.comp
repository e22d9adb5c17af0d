// Second pass of histogram_private_array: one invocation per counter and image, adding up the
// image's partial histograms (exact: each image has fewer than 2^32 pixels). Workgroup row i sums
// image i of the atlas.
layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer Counts { uint counts[]; };  // [image][u_words]
layout(std430, binding = 2) readonly buffer Partials { uint partials[]; };
layout(std430, binding = 4) readonly buffer Ranges { ivec2 ranges[]; };  // [first, end) per image

uniform int u_words;

void main() {
  const int k = int(gl_GlobalInvocationID.x);
  if (k >= u_words) return;
  const ivec2 range = ranges[gl_WorkGroupID.y];
  uint n = 0u;
  for (int i = range.x; i < range.y; ++i) n += partials[i * u_words + k];
  counts[int(gl_WorkGroupID.y) * u_words + k] = n;
}

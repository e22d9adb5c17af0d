// Second pass of histogram_private_array: one invocation per counter, adding up the N partial
// histograms (exact: the image has fewer than 2^32 pixels).
layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer Counts { uint counts[]; };
layout(std430, binding = 2) readonly buffer Partials { uint partials[]; };

uniform int u_invocations;
uniform int u_words;

void main() {
  const int k = int(gl_GlobalInvocationID.x);
  if (k >= u_words) return;
  uint n = 0u;
  for (int i = 0; i < u_invocations; ++i) n += partials[i * u_words + k];
  counts[k] = n;
}

// Shared by the ordered-scan shaders: 256-invocation workgroups dispatched as a flat 1D sequence
// (folded into a 2D grid past the device's per-dimension group limit), and a workgroup-wide
// exclusive scan: 16 invocations each scan 16 values serially, one scans the 16 partial sums.
// Three barriers regardless of the device's subgroup size; the shared array is padded by one word
// per 16 so the raking invocations do not hit the same bank.

layout(local_size_x = 256) in;
const uint kThreads = 256u;

uniform uint u_num_groups;  // real workgroups; the 2D grid may hold a few more

uint flat_group_index() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

shared uint s_scan[kThreads + kThreads / 16u];
shared uint s_rake[16];
shared uint s_total;

// The sum of v over the invocations before this one (in gl_LocalInvocationIndex order), and the
// sum over the whole workgroup in `total`. Called once per shader run (uses shared memory).
uint workgroup_exclusive_scan(uint v, out uint total) {
  uint t = gl_LocalInvocationIndex;
  s_scan[t + t / 16u] = v;
  barrier();
  if (t < 16u) {
    uint sum = 0u;
    for (uint i = 0u; i < 16u; ++i) {
      uint k = t * 17u + i;
      uint x = s_scan[k];
      s_scan[k] = sum;
      sum += x;
    }
    s_rake[t] = sum;
  }
  barrier();
  if (t == 0u) {
    uint sum = 0u;
    for (uint i = 0u; i < 16u; ++i) {
      uint x = s_rake[i];
      s_rake[i] = sum;
      sum += x;
    }
    s_total = sum;
  }
  barrier();
  total = s_total;
  return s_scan[t + t / 16u] + s_rake[t / 16u];
}

// The sum of v over the workgroup (every invocation gets it).
uint workgroup_sum(uint v) {
  uint t = gl_LocalInvocationIndex;
  s_scan[t + t / 16u] = v;
  barrier();
  if (t < 16u) {
    uint sum = 0u;
    for (uint i = 0u; i < 16u; ++i) sum += s_scan[t * 17u + i];
    s_rake[t] = sum;
  }
  barrier();
  if (t == 0u) {
    uint sum = 0u;
    for (uint i = 0u; i < 16u; ++i) sum += s_rake[i];
    s_total = sum;
  }
  barrier();
  return s_total;
}

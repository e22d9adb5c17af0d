#include "gpu/context.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpu/histogram.h"
#include "gpu/image.h"
#include "gpu/internal/driver_threads.h"
#include "gpu/reference/histogram.h"
#include "tests/gpu_test_env.h"

namespace glimpse::gpu {
namespace {

TEST(ContextTest, ReportsA43CoreContextWithComputeLimits) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  const DeviceInfo& info = ctx.info();
  EXPECT_FALSE(info.renderer.empty());
  GLint major = 0, minor = 0;
  glGetIntegerv(GL_MAJOR_VERSION, &major);
  glGetIntegerv(GL_MINOR_VERSION, &minor);
  EXPECT_GE(major * 10 + minor, 43) << info.version;
  EXPECT_GE(info.limits.max_texture_size, 4096);
  EXPECT_GE(info.limits.max_shared_memory_bytes, 32768);
  EXPECT_GE(info.limits.max_invocations, 1024);
  EXPECT_GE(info.limits.max_storage_block_bytes, int64_t{1} << 24);
  EXPECT_GE(info.limits.max_group_count[0], 65535);
}

TEST(ContextTest, SubgroupFeatureBitsAreNamedInOrder) {
  EXPECT_TRUE(SubgroupFeatureNames(0).empty());
  EXPECT_EQ(
      SubgroupFeatureNames(GL_SUBGROUP_FEATURE_BASIC_BIT_KHR | GL_SUBGROUP_FEATURE_BALLOT_BIT_KHR |
                           GL_SUBGROUP_FEATURE_SHUFFLE_BIT_KHR),
      (std::vector<std::string_view>{"basic", "ballot", "shuffle"}));
  EXPECT_EQ(SubgroupFeatureNames(GL_SUBGROUP_FEATURE_QUAD_BIT_KHR | 0x100u | 0x200u),
            (std::vector<std::string_view>{"quad", "partitioned_nv"}));  // unknown bits left out
  DeviceLimits l;
  l.subgroup_ballot = true;
  l.subgroup_size = 32;
  l.subgroup_features = GL_SUBGROUP_FEATURE_BASIC_BIT_KHR | GL_SUBGROUP_FEATURE_ARITHMETIC_BIT_KHR;
  EXPECT_EQ(DescribeSubgroups(l),
            "ballots yes; GL_KHR_shader_subgroup 32 invocations (basic, arithmetic); NV thread "
            "shuffle no");
}

// What the device reports of subgroups hangs together: a subgroup size only with the extension
// in compute shaders, a power of two with at least the basic operations. Mesa 22's llvmpipe has
// ballots (GL_ARB_shader_ballot) but not GL_KHR_shader_subgroup.
TEST(ContextTest, SubgroupLimitsHangTogether) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  const DeviceLimits& l = ctx.limits();
  if (l.subgroup_size > 0) {
    EXPECT_TRUE(GLAD_GL_KHR_shader_subgroup);
    EXPECT_LE(l.subgroup_size, 128);
    EXPECT_EQ(l.subgroup_size & (l.subgroup_size - 1), 0) << l.subgroup_size;
    EXPECT_NE(l.subgroup_features & GL_SUBGROUP_FEATURE_BASIC_BIT_KHR, 0u);
  } else {
    EXPECT_EQ(l.subgroup_features, 0u);
  }
  if (ctx.info().software) {
    EXPECT_TRUE(l.subgroup_ballot) << ctx.info().renderer;
  }
  EXPECT_EQ(l.thread_shuffle, GLAD_GL_NV_shader_thread_shuffle != 0);
}

TEST(ContextTest, BadShaderReturnsTheInfoLog) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  auto missing = ctx.Program("no_such_shader");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  // The prelude compiles alone with a define that breaks the GLSL: the error carries the log.
  auto broken = ctx.Program("prelude", "#define FMT_UINT 1\nthis is not glsl;\n");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("compiling shader prelude"), std::string::npos)
      << broken.status();
}

// Inside a ProgramBatch a new program's id comes back before its compile is checked; the
// outermost Finish() (or the batch's end) reports the one that failed, worded as Program()
// words it, and forgets it; the batch's other programs work.
TEST(ContextTest, ProgramBatchReportsFailuresAtFinishAndKeepsTheRest) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(testing::TestSeed());
  const std::string broken_defines = "#define FMT_UINT 1\nthis is not glsl;\n";
  const size_t before = ctx.programs_built();
  HistogramKernel histogram(ctx);
  absl::Status finished;
  {
    ProgramBatch outer(ctx);
    ASSERT_TRUE(histogram.Prepare(SampleType::kUint8).ok());
    ProgramBatch inner(ctx);
    absl::StatusOr<GLuint> broken = ctx.Program("prelude", broken_defines);
    EXPECT_TRUE(broken.ok()) << "inside a batch the error waits for Finish(): " << broken.status();
    EXPECT_TRUE(inner.Finish().ok()) << "an inner batch leaves the checks to the outermost";
    finished = outer.Finish();
    EXPECT_TRUE(outer.Finish().ok()) << "a second Finish() has nothing left to check";
  }
  ASSERT_FALSE(finished.ok());
  EXPECT_EQ(finished.code(), absl::StatusCode::kInternal);
  EXPECT_NE(finished.message().find("compiling shader prelude"), std::string::npos) << finished;
  const size_t built = ctx.programs_built() - before;
  EXPECT_GT(built, 0u);
  // Forgotten: asked again outside a batch, it fails at once and is not counted.
  EXPECT_FALSE(ctx.Program("prelude", broken_defines).ok());
  EXPECT_EQ(ctx.programs_built() - before, built);
  // A batch that ends without Finish() checks as it goes.
  {
    ProgramBatch unfinished(ctx);
    EXPECT_TRUE(ctx.Program("prelude", broken_defines).ok());
  }
  EXPECT_EQ(ctx.programs_built() - before, built);
  // The batch's programs run: the histogram of a random image equals the CPU reference.
  const HostImage host = testing::RandomImage({67, 41, 4, SampleType::kUint8}, rng);
  absl::StatusOr<Image> image = Image::Upload(ctx, host);
  ASSERT_TRUE(image.ok()) << image.status();
  for (HistogramVariant v : {HistogramVariant::kGlobalAtomics, HistogramVariant::kAuto}) {
    HistogramOptions o;
    o.variant = v;
    absl::StatusOr<HistogramResult> got = histogram.Run(*image, o);
    absl::StatusOr<HistogramResult> want = reference::Histogram(host, o);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ(got->counts, want->counts) << HistogramVariantName(v);
  }
}

TEST(ContextTest, UnknownDeviceIsRefusedByName) {
  auto bad = Context::Create({.device = "gpu-please"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("gpu-please"), std::string::npos);
}

std::string OwnName() {
  char name[64] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

int MaskCpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  return sched_getaffinity(0, sizeof(mask), &mask) == 0 ? CPU_COUNT(&mask) : 0;
}

// Threads that wait until released, each reporting its tid.
class WaitingThreads {
 public:
  explicit WaitingThreads(int n) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this] {
        std::unique_lock lock(mu_);
        tids_.push_back(gettid());
        cv_.notify_all();
        cv_.wait(lock, [this] { return released_; });
      });
    }
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return tids_.size() == size_t(n); });
    std::sort(tids_.begin(), tids_.end());
  }
  ~WaitingThreads() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  std::vector<pid_t> tids() {
    std::lock_guard lock(mu_);
    return tids_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<pid_t> tids_;
  bool released_ = false;
  std::vector<std::thread> threads_;
};

TEST(DriverThreadsTest, CaptureFindsTheThreadsStartedWithinIt) {
  const std::string own = OwnName();
  ASSERT_NE(own, kDriverThreadName);
  WaitingThreads before(1);
  std::vector<pid_t> started, inside;
  {
    DriverThreadCapture capture;
    EXPECT_EQ(OwnName(), kDriverThreadName);
    WaitingThreads during(2);
    inside = during.tids();
    started = capture.Started();
  }
  EXPECT_EQ(OwnName(), own);   // given back
  EXPECT_EQ(started, inside);  // not the thread started before, nor the calling one
}

// A thread that blocks in its start-up before it names itself (here a sleep; in a driver, the
// memory map lock its siblings' stacks hold) is waited for: taken for a driver's thread by the
// name it inherited, it would be pinned.
TEST(DriverThreadsTest, ThreadsBlockedBeforeNamingThemselvesAreWaitedFor) {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  std::vector<pid_t> started, plain_tids;
  std::thread late;
  {
    DriverThreadCapture capture;
    WaitingThreads plain(1);  // keeps the inherited name
    late = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      pthread_setname_np(pthread_self(), "named-late");
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return released; });
    });
    started = capture.Started();
    plain_tids = plain.tids();
  }
  {
    std::lock_guard lock(mu);
    released = true;
  }
  cv.notify_all();
  late.join();
  EXPECT_EQ(started, plain_tids);
}

// Threads started meanwhile by other threads do not carry the inherited name and are not waited
// for, wherever they block (here reading a pipe, as a server's threads wait in epoll): waiting
// for them to park would hold a context's creation for the whole 10 s.
TEST(DriverThreadsTest, OtherThreadsStartedMeanwhileAreNotWaitedFor) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  std::mutex mu;
  std::condition_variable cv;
  bool start = false;
  pid_t outsider_tid = 0;
  std::thread outsider;
  std::thread starter([&] {  // started before the capture, so not named by it
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return start; });
    outsider = std::thread([&] {
      {
        std::lock_guard held(mu);
        outsider_tid = gettid();
      }
      cv.notify_all();
      char byte;
      EXPECT_EQ(read(pipe_fds[0], &byte, 1), 1);
    });
  });
  std::vector<pid_t> started;
  std::chrono::steady_clock::duration took{};
  {
    DriverThreadCapture capture;
    {
      std::unique_lock lock(mu);
      start = true;
      cv.notify_all();
      cv.wait(lock, [&] { return outsider_tid != 0; });
    }
    const auto t0 = std::chrono::steady_clock::now();
    started = capture.Started();
    took = std::chrono::steady_clock::now() - t0;
  }
  starter.join();
  EXPECT_EQ(write(pipe_fds[1], "x", 1), 1);
  outsider.join();
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  EXPECT_TRUE(started.empty()) << started.size() << " threads taken for a driver's";
  EXPECT_LT(took, std::chrono::seconds(5)) << "waited for a thread that is not the driver's";
}

// Two captures at once (contexts made on two threads): neither takes the other's thread, named
// like a driver's while it captures, for one.
TEST(DriverThreadsTest, ConcurrentCapturesDoNotTakeEachOther) {
  std::optional<DriverThreadCapture> mine(std::in_place);
  std::vector<pid_t> theirs_started;
  pid_t theirs = 0;
  std::mutex mu;
  std::condition_variable cv;
  bool captured = false, checked = false;
  std::thread other([&] {
    DriverThreadCapture capture;
    std::unique_lock lock(mu);
    theirs = gettid();
    captured = true;
    cv.notify_all();
    cv.wait(lock, [&] { return checked; });
    theirs_started = capture.Started();
  });
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return captured; });
  }
  const std::vector<pid_t> started = mine->Started();
  EXPECT_TRUE(std::find(started.begin(), started.end(), theirs) == started.end())
      << "the other capturing thread was taken for a driver's";
  {
    std::lock_guard lock(mu);
    checked = true;
  }
  cv.notify_all();
  other.join();
  EXPECT_TRUE(theirs_started.empty());
}

TEST(DriverThreadsTest, PinsOneThreadPerCpuRoundRobin) {
  const int cpus = MaskCpus();
  if (cpus < 2) GTEST_SKIP() << "one CPU in this process's affinity mask: nothing to spread";
  WaitingThreads waiting(cpus + 1);
  const std::vector<pid_t> tids = waiting.tids();
  const std::vector<PinnedThread> pinned = PinOnePerCpu(tids);
  ASSERT_EQ(pinned.size(), tids.size());
  std::vector<int> seen;
  for (size_t i = 0; i < pinned.size(); ++i) {
    EXPECT_EQ(pinned[i].tid, tids[i]);
    EXPECT_EQ(ThreadCpus(tids[i]), std::to_string(pinned[i].cpu));  // as /proc shows it
    if (i < size_t(cpus)) seen.push_back(pinned[i].cpu);
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end()) << "two threads on one CPU";
  EXPECT_EQ(pinned[size_t(cpus)].cpu, pinned[0].cpu);  // round robin past the last CPU
}

TEST(DriverThreadsTest, FewerThreadsThanCpusStayFree) {
  const int cpus = MaskCpus();
  if (cpus < 2) GTEST_SKIP() << "one CPU in this process's affinity mask: nothing to spread";
  WaitingThreads waiting(cpus - 1);
  EXPECT_TRUE(PinOnePerCpu(waiting.tids()).empty());
  for (pid_t tid : waiting.tids()) EXPECT_EQ(ThreadCpus(tid), ThreadCpus(gettid()));
}

TEST(DriverThreadsTest, CpuRendererWorkersArePinnedOnePerCpu) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  if (!ctx.info().software) GTEST_SKIP() << "not a CPU renderer: " << ctx.info().renderer;
  const int cpus = MaskCpus();
  if (cpus < 2) GTEST_SKIP() << "one CPU in this process's affinity mask: nothing to spread";
  const std::vector<PinnedThread>& pinned = ctx.pinned_threads();
  // llvmpipe starts LP_NUM_THREADS workers when it is set (none for 0: it runs dispatches on the
  // calling thread); they are pinned when there is one for every CPU.
  if (const char* n = std::getenv("LP_NUM_THREADS"); n != nullptr) {
    const int workers = std::max(0, std::atoi(n));
    EXPECT_EQ(pinned.size(), workers >= cpus ? size_t(workers) : 0);
  }
  if (pinned.empty()) GTEST_SKIP() << "fewer llvmpipe workers than CPUs (LP_NUM_THREADS): unpinned";
  std::vector<int> seen;
  for (const PinnedThread& t : pinned) {
    std::string name;
    std::ifstream("/proc/self/task/" + std::to_string(t.tid) + "/comm") >> name;
    EXPECT_EQ(name, kDriverThreadName) << "thread " << t.tid;
    EXPECT_EQ(ThreadCpus(t.tid), std::to_string(t.cpu)) << "thread " << t.tid;
    if (seen.size() < size_t(cpus)) seen.push_back(t.cpu);
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end()) << "two workers on one CPU";
  // A second context on the same display (on a thread of its own, as contexts are) finds them
  // pinned already.
  std::vector<pid_t> second_tids;
  std::thread([&] {
    auto second = Context::Create({.log_renderer = false});
    ASSERT_TRUE(second.ok()) << second.status();
    for (const PinnedThread& t : (*second)->pinned_threads()) second_tids.push_back(t.tid);
  }).join();
  std::vector<pid_t> tids;
  for (const PinnedThread& t : pinned) tids.push_back(t.tid);
  EXPECT_EQ(second_tids, tids);
}
}  // namespace
}  // namespace glimpse::gpu

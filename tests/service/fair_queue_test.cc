// The GPU worker's scheduler on its own (server/worker/fair_queue.h): no GPU, no server, fake
// costs.
#include "server/worker/fair_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tests/gpu_test_env.h"

namespace glimpse::server {
namespace {

struct FakeJob {
  std::string tenant;
  int id = 0;
  uint64_t cost_ns = 0;  // what it "runs" for
};
using Queue = FairQueue<FakeJob>;

// Takes the next job (any job may run), runs it for its cost; nullopt when empty.
std::optional<FakeJob> RunNext(Queue& q) {
  std::vector<Queue::Entry> dropped;
  std::optional<Queue::Entry> e =
      q.Visit([](Queue::Entry&) { return Queue::Verdict::kTake; }, &dropped);
  EXPECT_TRUE(dropped.empty());
  if (!e) return std::nullopt;
  q.Finish(*e, e->item.cost_ns);
  return e->item;
}

std::string Order(Queue& q, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    std::optional<FakeJob> j = RunNext(q);
    if (!j) break;
    s += j->tenant;
  }
  return s;
}

void Push(Queue& q, const std::string& tenant, double weight, uint64_t cost, int n,
          Priority priority = Priority::kInteractive, uint64_t estimate = 0) {
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(q.Push({tenant, i, cost}, {tenant, weight, priority}, estimate ? estimate : cost),
              Refusal::kNone);
  }
}

TEST(SchedulerTest, EqualTenantsAlternateWhateverEachQueues) {
  Queue q({.policy = SchedulerPolicy::kFair, .max_queued = 1000});
  Push(q, "A", 1, 100, 12);  // A queues everything first
  Push(q, "B", 1, 100, 3);
  EXPECT_EQ(Order(q, 15), "ABABABAAAAAAAAA");
}

TEST(SchedulerTest, FifoServesInArrivalOrder) {
  Queue q({.policy = SchedulerPolicy::kFifo, .max_queued = 1000});
  Push(q, "A", 1, 100, 4);
  Push(q, "B", 3, 100, 2);
  EXPECT_EQ(Order(q, 6), "AAAABB");
}

TEST(SchedulerTest, WeightsOneToThreeGiveThreeJobsToOne) {
  Queue q({.policy = SchedulerPolicy::kFair, .max_queued = 1000});
  Push(q, "A", 1, 30, 10);
  Push(q, "B", 3, 30, 30);
  EXPECT_EQ(Order(q, 16), "ABBBABBBABBBABBB");
}

TEST(SchedulerTest, CostsNotCountsAreShared) {
  // A's jobs take 4x B's: B runs four jobs for each of A's.
  Queue q({.policy = SchedulerPolicy::kFair, .max_queued = 1000});
  Push(q, "A", 1, 400, 5);
  Push(q, "B", 1, 100, 20);
  EXPECT_EQ(Order(q, 15), "ABBBBABBBBABBBB");
}

TEST(SchedulerTest, MeasuredTimeCorrectsAWrongEstimate) {
  // A's jobs are estimated at 1 but run for 400; B's are estimated and run at 100. Charged by
  // the estimate, A would run as often as B; charged by the run time, it runs a quarter as often.
  Queue q({.policy = SchedulerPolicy::kFair, .max_queued = 1000});
  Push(q, "A", 1, 400, 5, Priority::kInteractive, /*estimate=*/1);
  Push(q, "B", 1, 100, 20);
  EXPECT_EQ(Order(q, 15), "ABBBBABBBBABBBB");
}

TEST(SchedulerTest, InteractiveGoesFirstWithinItsTenantOnly) {
  Queue q({.policy = SchedulerPolicy::kFair, .max_queued = 1000});
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(q.Push({"A", i, 100}, {"A", 1, Priority::kBatch}, 100), Refusal::kNone);
  }
  ASSERT_EQ(q.Push({"A", 10, 100}, {"A", 1, Priority::kInteractive}, 100), Refusal::kNone);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(q.Push({"B", 20 + i, 100}, {"B", 1, Priority::kBatch}, 100), Refusal::kNone);
  }
  std::vector<int> ids;
  std::string tenants;
  while (std::optional<FakeJob> j = RunNext(q)) {
    ids.push_back(j->id);
    tenants += j->tenant;
  }
  // A's interactive job first among A's, but A's interactive work does not take B's turns.
  EXPECT_EQ(tenants,
            "ABABAB"
            "A");
  EXPECT_EQ(ids, (std::vector<int>{10, 20, 0, 21, 1, 22, 2}));
}

TEST(SchedulerTest, TenantBoundRefusesThatTenantOnly) {
  Queue q({.policy = SchedulerPolicy::kFair, .max_queued = 6, .tenant_max_queued = 3});
  Push(q, "A", 1, 100, 3);
  EXPECT_EQ(q.Push({"A", 3, 100}, {"A", 1}, 100), Refusal::kTenantQueueFull);
  EXPECT_EQ(q.queued("A"), 3u);
  Push(q, "B", 1, 100, 3);
  EXPECT_EQ(q.Push({"B", 3, 100}, {"B", 1}, 100), Refusal::kTenantQueueFull);
  // The global bound still holds for a tenant under its own.
  EXPECT_EQ(q.Push({"C", 0, 100}, {"C", 1}, 100), Refusal::kQueueFull);
  EXPECT_EQ(q.size(), 6u);
  // Once one of A's has run, A is admitted again.
  ASSERT_TRUE(RunNext(q).has_value());
  EXPECT_EQ(q.Push({"A", 4, 100}, {"A", 1}, 100), Refusal::kNone);
}

TEST(SchedulerTest, UnboundedTenantMayFillTheQueue) {
  Queue q({.policy = SchedulerPolicy::kFair, .max_queued = 5, .tenant_max_queued = 0});
  Push(q, "A", 1, 100, 5);
  EXPECT_EQ(q.Push({"A", 5, 100}, {"A", 1}, 100), Refusal::kQueueFull);
  EXPECT_EQ(q.Push({"B", 0, 100}, {"B", 1}, 100), Refusal::kQueueFull);
}

TEST(SchedulerTest, IdleTenantSavesNoCredit) {
  // A runs alone for a long time; B then arrives with a backlog. B must not get the GPU to itself
  // for the time A ran alone: from B's arrival the two alternate.
  Queue q({.policy = SchedulerPolicy::kFair, .max_queued = 1000});
  Push(q, "A", 1, 100, 50);
  EXPECT_EQ(Order(q, 40), std::string(40, 'A'));
  Push(q, "B", 1, 100, 10);
  EXPECT_EQ(Order(q, 10), "BABABABABA");
}

TEST(SchedulerTest, IdleTenantKeepsItsDebt) {
  // A takes a long job while B waits behind it; A leaving and coming back at once must not
  // wipe out what it took.
  Queue q({.policy = SchedulerPolicy::kFair, .max_queued = 1000});
  Push(q, "A", 1, 1000, 1);
  Push(q, "B", 1, 100, 20);
  EXPECT_EQ(Order(q, 2), "AB");
  Push(q, "A", 1, 100, 5);
  // B is 900 behind A: nine more of B's jobs before A's next.
  EXPECT_EQ(Order(q, 11), "BBBBBBBBBAB");
}

TEST(SchedulerTest, DroppedAndSkippedJobsKeepTheirPlaces) {
  Queue q({.policy = SchedulerPolicy::kFair, .max_queued = 1000});
  Push(q, "A", 1, 100, 4);
  Push(q, "B", 1, 100, 2);
  std::vector<Queue::Entry> dropped;
  // A's job 1 is dropped (say its deadline passed); A's others cannot run now (say they wait
  // for result bytes): B's first job runs, and the visit goes on past it to B's second.
  int offered_after_take = 0;
  bool took = false;
  std::optional<Queue::Entry> e = q.Visit(
      [&](Queue::Entry& entry) {
        if (took) ++offered_after_take;
        if (entry.item.tenant == "A") {
          return entry.item.id == 1 ? Queue::Verdict::kDrop : Queue::Verdict::kKeep;
        }
        took = true;
        return Queue::Verdict::kTake;
      },
      &dropped);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->item.tenant, "B");
  EXPECT_EQ(e->item.id, 0);
  EXPECT_EQ(offered_after_take, 1);  // B's second, answered kTake and kept
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].item.id, 1);
  EXPECT_EQ(q.size(), 4u);
  EXPECT_EQ(q.queued("A"), 3u);
  EXPECT_EQ(q.queued("B"), 1u);
  q.Finish(*e, 100);
  std::string order;
  while (std::optional<FakeJob> j = RunNext(q)) order += j->tenant + std::to_string(j->id) + " ";
  EXPECT_EQ(order, "A0 B1 A2 A3 ");  // A's skipped jobs kept their places, in order
}

TEST(SchedulerTest, ActiveTenantsCountsQueuedAndRunning) {
  Queue q({.policy = SchedulerPolicy::kFair, .max_queued = 1000});
  EXPECT_EQ(q.active_tenants(), 0u);
  Push(q, "A", 1, 100, 1);
  Push(q, "B", 1, 100, 1);
  EXPECT_EQ(q.active_tenants(), 2u);
  std::vector<Queue::Entry> dropped;
  std::optional<Queue::Entry> e =
      q.Visit([](Queue::Entry&) { return Queue::Verdict::kTake; }, &dropped);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(q.active_tenants(), 2u);  // one running, one waiting
  q.Finish(*e, 100);
  EXPECT_EQ(q.active_tenants(), 1u);
  ASSERT_TRUE(RunNext(q).has_value());
  EXPECT_EQ(q.active_tenants(), 0u);
}

// Several tenants with random weights and random job costs, estimates off by up to 5x either
// way, every tenant kept backlogged. Start-time fair queueing bounds the gap between any two
// tenants' normalized service by the sum of their largest jobs over their weights; first come,
// first served, on the same arrivals, breaks that bound.
struct Simulation {
  std::vector<double> weights;
  std::vector<uint64_t> max_cost;
  std::vector<double> served;  // ns
  double worst_excess = 0;     // the largest gap past the bound seen, ns/weight
};

Simulation Simulate(SchedulerPolicy policy, uint64_t seed, int tenants, int jobs) {
  std::mt19937_64 rng(seed);
  Simulation sim;
  std::uniform_real_distribution<double> factor(0.2, 5.0);
  std::vector<std::uniform_int_distribution<uint64_t>> cost;
  for (int t = 0; t < tenants; ++t) {
    // Weights 1 and 4 for the first two, so they always differ; the rest at random.
    sim.weights.push_back(t == 0 ? 1 : t == 1 ? 4 : double(1 + rng() % 5));
    const uint64_t hi = 1'000'000 + rng() % 20'000'000;
    sim.max_cost.push_back(hi);
    cost.emplace_back(hi / 4, hi);
  }
  sim.served.assign(size_t(tenants), 0);
  Queue q({.policy = policy, .max_queued = 100000});
  auto push = [&](int t) {
    const uint64_t c = cost[size_t(t)](rng);
    std::string name = "t";  // (operator+ here trips GCC 12's -Wrestrict)
    name += std::to_string(t);
    EXPECT_EQ(
        q.Push({name, t, c}, {name, sim.weights[size_t(t)]}, uint64_t(double(c) * factor(rng))),
        Refusal::kNone);
  };
  // Arrivals in turn, four deep each, one more on each completion: all stay backlogged.
  for (int k = 0; k < 4; ++k) {
    for (int t = 0; t < tenants; ++t) push(t);
  }
  for (int i = 0; i < jobs; ++i) {
    std::optional<FakeJob> j = RunNext(q);
    if (!j) break;
    sim.served[size_t(j->id)] += double(j->cost_ns);
    push(j->id);
    for (int a = 0; a < tenants; ++a) {
      for (int b = 0; b < tenants; ++b) {
        const double gap = sim.served[size_t(a)] / sim.weights[size_t(a)] -
                           sim.served[size_t(b)] / sim.weights[size_t(b)];
        const double bound = double(sim.max_cost[size_t(a)]) / sim.weights[size_t(a)] +
                             double(sim.max_cost[size_t(b)]) / sim.weights[size_t(b)];
        sim.worst_excess = std::max(sim.worst_excess, gap - bound);
      }
    }
  }
  return sim;
}

TEST(SchedulerTest, RandomTenantsStayWithinTheFairnessBound) {
  GLIMPSE_SEED_TRACE();
  const uint64_t seed = glimpse::testing::TestSeed();
  for (int tenants : {2, 3, 5}) {
    SCOPED_TRACE(::testing::Message() << tenants << " tenants, seed " << seed);
    const Simulation fair =
        Simulate(SchedulerPolicy::kFair, seed + uint64_t(tenants), tenants, 3000);
    EXPECT_LE(fair.worst_excess, 0.0);
    // The shares come out by weight: within 2% of weight / total weight.
    double total = 0, total_weight = 0;
    for (size_t t = 0; t < fair.served.size(); ++t) {
      total += fair.served[t];
      total_weight += fair.weights[t];
    }
    for (size_t t = 0; t < fair.served.size(); ++t) {
      EXPECT_NEAR(fair.served[t] / total, fair.weights[t] / total_weight, 0.02)
          << "tenant " << t << " weight " << fair.weights[t];
    }
    const Simulation fifo =
        Simulate(SchedulerPolicy::kFifo, seed + uint64_t(tenants), tenants, 3000);
    EXPECT_GT(fifo.worst_excess, 0.0) << "first come, first served should break the bound";
  }
}

TEST(SchedulerTest, CostModelLearnsNanosecondsPerPixel) {
  CostModel m;
  EXPECT_EQ(m.Estimate("BoxFilter", 1000), uint64_t(CostModel::kDefaultNsPerPixel * 1000));
  m.Observe("BoxFilter", 1000, 20000);  // 20 ns per pixel
  EXPECT_EQ(m.Estimate("BoxFilter", 500), 10000u);
  m.Observe("BoxFilter", 1000, 60000);  // 60: the average moves a quarter of the way
  EXPECT_EQ(m.Estimate("BoxFilter", 1000), 30000u);
  // Other methods are apart; 0 pixels estimates per job.
  EXPECT_EQ(m.Estimate("Histogram", 0), uint64_t(CostModel::kDefaultNsPerPixel));
  m.Observe("UploadImage", 0, 7000);
  EXPECT_EQ(m.Estimate("UploadImage", 0), 7000u);
}

TEST(SchedulerTest, NamesParseBack) {
  EXPECT_EQ(ParsePriority("interactive"), Priority::kInteractive);
  EXPECT_EQ(ParsePriority("batch"), Priority::kBatch);
  EXPECT_EQ(ParsePriority("Batch"), std::nullopt);
  EXPECT_EQ(ParsePriority(""), std::nullopt);
  EXPECT_EQ(ParsePolicy("fair"), SchedulerPolicy::kFair);
  EXPECT_EQ(ParsePolicy("fifo"), SchedulerPolicy::kFifo);
  EXPECT_EQ(ParsePolicy("drr"), std::nullopt);
  EXPECT_EQ(PolicyName(SchedulerPolicy::kFifo), "fifo");
  EXPECT_EQ(PriorityName(Priority::kBatch), "batch");
}

}  // namespace
}  // namespace glimpse::server

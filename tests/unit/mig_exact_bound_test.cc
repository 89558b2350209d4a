// The exact search's cost model (pack_solver.cc, exact_state_bound): an upper bound on the states the
// search creates, checked before it starts, so that it runs where it finishes and is skipped where it
// cannot; and the shipped example, which ran a search to its limit before, packs as well as then
// without doing so.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "gpuplan/catalog.h"
#include "gpuplan/mig_pack.h"

namespace gpuplan::mig {
namespace {

// A file of the source tree, whatever directory the test runs in (ctest runs it in build/tests).
std::string read(const std::string& path) {
  std::ifstream in(std::string(GPUPLAN_SOURCE_DIR) + "/" + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Small fleets of up to three GPU types (1-4 GPUs each) with 1-6 resource request lines of 1-8 units:
// small enough that most exact searches finish, large enough that some cannot.
struct Case {
  Fleet fleet;
  std::vector<PackRequest> requests;
};

Case random_case(std::mt19937& rng) {
  auto cat = Catalog::embedded();
  Case c;
  for (const char* id : {"a100-40gb-sxm4", "a100-80gb-sxm4", "h100-80gb-sxm5"}) {
    if (rng() % 2) continue;
    auto ref = cat->resolve(id);
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) c.fleet.gpus.push_back(FleetGpu{id, i, ref->gpu, ref->mig_table, {}});
  }
  const int lines = 1 + static_cast<int>(rng() % 6);
  for (int i = 0; i < lines; ++i) {
    PackRequest r;
    r.name = "r" + std::to_string(i);
    r.count = 1 + static_cast<int>(rng() % 8);
    r.priority = static_cast<int>(rng() % 2);
    r.kind = PackRequest::Kind::kResources;
    r.memory_gb = std::vector<double>{4, 9, 18, 30}[rng() % 4];
    r.compute_slices = 1 + static_cast<int>(rng() % 3);
    c.requests.push_back(r);
  }
  return c;
}

// A state limit no search reaches (the work limit still stops the largest).
constexpr int kNoStateLimit = 1 << 30;
// The exact search's work limit (kExactWorkLimit in pack_solver.cc): fills one search may evaluate.
constexpr long long kWorkLimit = 200000;

TEST(MigExactBound, BoundsTheStatesOfEverySearchThatRan) {
  auto cat = Catalog::embedded();
  std::mt19937 rng(41);
  int checked = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const Case c = random_case(rng);
    if (c.fleet.gpus.empty()) continue;
    PackOptions unlimited;
    unlimited.exact_state_limit = kNoStateLimit;
    auto r = pack(*cat, c.fleet, c.requests, unlimited);
    ASSERT_TRUE(r.ok()) << r.error().message;
    // (Searches the work half of the cost model rules out are skipped; they have nothing to check.)
    if (r->stats.exact_runs != 1 || r->stats.exact_aborted != 0) continue;
    // One search, run to the end: its states stay within the bound computed before it started.
    EXPECT_LE(static_cast<double>(r->stats.exact_states), r->stats.largest_run_bound) << "trial " << trial;
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

TEST(MigExactBound, SearchesThatFinishStillRunAndThoseThatCannotAreSkipped) {
  // Where the search finishes within the default state limit (seen with no limit), the default options
  // must still run it and return its plan; where the bound rules it out, the plan is the LP path's and
  // no search ran to its limit.
  auto cat = Catalog::embedded();
  std::mt19937 rng(43);
  int ran = 0, skipped = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const Case c = random_case(rng);
    if (c.fleet.gpus.empty()) continue;
    PackOptions unlimited;
    unlimited.exact_state_limit = kNoStateLimit;
    auto u = pack(*cat, c.fleet, c.requests, unlimited);
    auto d = pack(*cat, c.fleet, c.requests, PackOptions{});
    ASSERT_TRUE(u.ok() && d.ok());
    const bool fits_default =
        u->exact && u->stats.exact_aborted == 0 && u->stats.exact_states <= PackOptions{}.exact_state_limit;
    if (fits_default) {
      EXPECT_TRUE(d->exact) << "trial " << trial << ": states " << u->stats.exact_states << ", bound "
                            << d->stats.largest_skipped_bound;
      EXPECT_EQ(d->gpus_used, u->gpus_used) << "trial " << trial;
      ++ran;
    }
    if (d->stats.exact_skipped > 0) ++skipped;
    EXPECT_EQ(d->stats.exact_aborted, 0) << "trial " << trial;
  }
  EXPECT_GE(ran, 20);
  EXPECT_GE(skipped, 1);
}

TEST(MigExactBound, ExampleSkipsTheSearchItCannotFinishWithTheSamePlan) {
  // examples/mig (20 GPUs, 23 units, two busy instances): two exact searches (about 3,000 states each,
  // 67 fills per state) used to run to their work limit before the LP path found 8 GPUs. The cost
  // model skips them; the plan is the same: 8 GPUs (the lower bound), nothing disturbed or unplaced.
  auto cat = Catalog::embedded();
  auto fleet = parse_fleet(*cat, "examples/mig/fleet.yaml", read("examples/mig/fleet.yaml"));
  auto requests = parse_requests(*cat, "examples/mig/requests.yaml", read("examples/mig/requests.yaml"));
  ASSERT_TRUE(fleet.ok() && requests.ok());
  auto r = pack(*cat, *fleet, *requests, PackOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->gpus_used, 8);
  EXPECT_EQ(r->lower_bound, 8);
  EXPECT_EQ(r->disturbed, 0);
  EXPECT_TRUE(r->unplaced.empty());
  EXPECT_EQ(r->stats.exact_aborted, 0);  // no search ran to its limit
  EXPECT_GE(r->stats.exact_skipped, 1);  // the ones that could not finish were not started
  // Before, two searches each evaluated their limit of 200,000 fills and gave up; now every fill
  // evaluated belongs to a search that finished.
  EXPECT_LT(r->stats.exact_work, kWorkLimit);
  EXPECT_LT(r->stats.exact_states, PackOptions{}.exact_state_limit);
}

}  // namespace
}  // namespace gpuplan::mig

// Hostile and oversized inputs: YAML alias bombs and complex keys (every reader goes through
// yaml::parse), bounded collections (fleet GPUs, request lines and instances, compare and fit
// targets, offer rows), and cancellation of long runs (the MIG packer, the planner).
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <sstream>

#include "catalog/yaml_util.h"
#include "gpuplan/api.h"
#include "gpuplan/cancel.h"
#include "gpuplan/embedded.h"
#include "gpuplan/mig_pack.h"
#include "gpuplan/offers.h"
#include "mig/table_model.h"

namespace gpuplan {
namespace {

std::shared_ptr<const Catalog> catalog() { return Catalog::embedded(); }

Result<Json> run(const std::string& command, const Json& request) {
  Context ctx{catalog()};
  return run_command(ctx, command, request);
}

// "Billion laughs": 9 levels of 9 aliases, 9^9 (387 million) nodes when walked, under the
// given key at the given indentation (a mapping inside a real document).
std::string laughs(const std::string& indent) {
  std::string s = indent + "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i <= 8; ++i) {
    const std::string prev = "*l" + std::to_string(i - 1);
    s += indent + "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
    for (int k = 0; k < 9; ++k) s += (k ? ", " : "") + prev;
    s += "]\n";
  }
  return s;
}

const char* kFleet = "nodes:\n  - name: n1\n    gpus:\n      - {target: a100-40gb-sxm4, count: 2}\n";

TEST(YamlLimits, BillionLaughsInARequestsFileIsRefusedBeforeExpansion) {
  const std::string requests = "requests:\n  - name: r\n    workload:\n" + laughs("      ");
  EXPECT_LT(requests.size(), 1000u);
  auto r = run("mig.pack", Json{{"fleet", kFleet}, {"requests", requests}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kLimit) << r.error().message;
  EXPECT_NE(r.error().message.find("kMaxAliasExpandedNodes"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("100000"), std::string::npos) << r.error().message;
}

TEST(YamlLimits, BillionLaughsInAFleetCatalogAndOffersFile) {
  // Fleet: the bomb is the instance list of a GPU (readers walk it).
  std::string fleet =
      "nodes:\n  - name: n1\n    gpus:\n      - target: a100-40gb-sxm4\n        extra:\n" + laughs("          ");
  auto f = run("mig.pack", Json{{"fleet", fleet}, {"requests", "requests: [{name: a, profile: 1g.5gb}]"}});
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().code, ErrorCode::kLimit) << f.error().message;
  // A --catalog file.
  Catalog fresh;
  const Status s = fresh.add_file("user/gpus.yaml", "gpus:\n  - id: x\n    bomb:\n" + laughs("      "));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kLimit) << s.error().message;
  // An offers YAML file.
  auto o = parse_offers(*catalog(), "offers.yaml", "offers:\n  - provider: p\n    x:\n" + laughs("      "));
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error().code, ErrorCode::kLimit) << o.error().message;
}

TEST(YamlLimits, AliasCountAndCycles) {
  std::string many = "a: &a x\nb: [";
  for (int i = 0; i < 1001; ++i) many += (i ? ", *a" : "*a");
  many += "]\n";
  auto p = yaml::parse("many.yaml", many);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, ErrorCode::kLimit);
  EXPECT_NE(p.error().message.find("kMaxAliases"), std::string::npos) << p.error().message;
  // A few aliases of a small block stay fine.
  auto ok = yaml::parse("ok.yaml", "base: &b {profile: 1g.5gb}\nlist: [*b, *b, *b]\n");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  auto j = yaml::to_json(*ok, "ok.yaml");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["list"].size(), 3u);
  // An alias inside its own anchor would make a cycle that every walk follows forever.
  auto cycle = yaml::parse("cycle.yaml", "a: &a [1, *a]\n");
  EXPECT_FALSE(cycle.ok());
}

TEST(YamlLimits, ComplexKeyIsInvalidDataNotInternal) {
  auto r = run("mig.pack", Json{{"fleet", kFleet}, {"requests", "? [a, b]\n: 1\n"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidData) << r.error().message;
  EXPECT_NE(r.error().message.find("key must be a single value"), std::string::npos) << r.error().message;
  auto nested =
      run("mig.pack", Json{{"fleet", kFleet}, {"requests", "requests:\n  - name: r\n    workload: {? {a: 1} : 2}\n"}});
  ASSERT_FALSE(nested.ok());
  EXPECT_EQ(nested.error().code, ErrorCode::kInvalidData) << nested.error().message;
  // to_json on a node that did not come through parse() refuses it too, without throwing.
  auto j = yaml::to_json(YAML::Load("? [a, b]\n: 1\n"), "direct.yaml");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.error().code, ErrorCode::kInvalidData);
  // And its node budget holds for a shared (aliased) node walked many times.
  auto budget = yaml::to_json(YAML::Load("a: &a [1, 2, 3]\nb: [*a, *a, *a]\n"), "direct.yaml", 10);
  ASSERT_FALSE(budget.ok());
  EXPECT_EQ(budget.error().code, ErrorCode::kLimit);
}

std::string fleet_of_counts(const std::vector<int>& counts) {
  std::string s = "nodes:\n  - name: n1\n    gpus:\n";
  for (int c : counts) s += "      - {target: a100-40gb-sxm4, count: " + std::to_string(c) + "}\n";
  return s;
}

TEST(PackLimits, FleetGpusRequestLinesAndInstances) {
  const std::string one = "requests: [{name: a, profile: 1g.5gb}]";
  // 100,000 GPUs in entries of 50,000: each entry passed the old per-entry bound.
  auto at = run("mig.pack", Json{{"fleet", fleet_of_counts({50000, 50000})}, {"requests", one}});
  EXPECT_TRUE(at.ok()) << at.error().message;
  auto over = run("mig.pack", Json{{"fleet", fleet_of_counts({50000, 50000, 1})}, {"requests", one}});
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code, ErrorCode::kLimit);
  EXPECT_NE(over.error().message.find("kMaxFleetGpus"), std::string::npos) << over.error().message;

  std::string lines = "requests:\n";
  for (int i = 0; i < 10001; ++i) lines += "  - {name: r" + std::to_string(i) + ", profile: 1g.5gb}\n";
  auto many = run("mig.pack", Json{{"fleet", kFleet}, {"requests", lines}});
  ASSERT_FALSE(many.ok());
  EXPECT_EQ(many.error().code, ErrorCode::kLimit);
  EXPECT_NE(many.error().message.find("kMaxRequestLines"), std::string::npos) << many.error().message;

  // 10^7 in one line was accepted; the total over lines is bounded at 10^6.
  auto big =
      run("mig.pack", Json{{"fleet", kFleet}, {"requests", "requests: [{name: a, profile: 1g.5gb, count: 10000000}]"}});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code, ErrorCode::kLimit);
  auto sum = run("mig.pack", Json{{"fleet", kFleet},
                                  {"requests",
                                   "requests: [{name: a, profile: 1g.5gb, count: 600000}, "
                                   "{name: b, profile: 1g.5gb, count: 400001}]"}});
  ASSERT_FALSE(sum.ok());
  EXPECT_EQ(sum.error().code, ErrorCode::kLimit);
  EXPECT_NE(sum.error().message.find("kMaxRequestedInstances"), std::string::npos) << sum.error().message;
  EXPECT_EQ(sum.error().field, "requests: request b: count");
}

TEST(PackLimits, TheLargestAcceptedInputPacks) {
  // 100,000 GPUs of three types and 700,000 instances over 9,000 lines: what the bounds admit, and
  // what must finish well inside the server's 10 s command time.
  std::string fleet =
      "nodes:\n  - name: n1\n    gpus:\n      - {target: a100-40gb-sxm4, count: 40000}\n"
      "      - {target: h100-80gb-sxm5, count: 40000}\n      - {target: a30, count: 20000}\n";
  std::string req = "requests:\n";
  const char* kinds[] = {"memory_gb: 4, compute_slices: 1", "memory_gb: 9, compute_slices: 2",
                         "memory_gb: 18, compute_slices: 3"};
  long long total = 0;
  for (int i = 0; i < 9000; ++i) {
    const int count = 50 + i % 56;
    total += count;
    req += "  - {name: r" + std::to_string(i) + ", priority: " + std::to_string(i % 3) +
           ", count: " + std::to_string(count) + ", " + kinds[i % 3] + "}\n";
  }
  ASSERT_LE(total, 1000000);
  auto r = run("mig.pack", Json{{"fleet", fleet}, {"requests", req}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT((*r)["gpus_used"].get<int>(), 0);
}

TEST(CommandLimits, CompareAndFitTargets) {
  Json gpus = Json::array();
  for (int i = 0; i < 65; ++i) gpus.push_back("a100-40gb-sxm4");
  auto c = run("compare", Json{{"gpu", gpus}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::kLimit);
  EXPECT_EQ(c.error().field, "gpu");
  EXPECT_NE(c.error().message.find("kMaxCompareTargets"), std::string::npos) << c.error().message;
  gpus.erase(gpus.begin());
  EXPECT_TRUE(run("compare", Json{{"gpu", gpus}}).ok());

  Json targets = Json::array();
  for (int i = 0; i < 257; ++i) targets.push_back("a100-80gb-sxm4");
  auto f = run("fit", Json{{"model", "llama-2-7b"}, {"gpu", targets}});
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().code, ErrorCode::kLimit);
  EXPECT_NE(f.error().message.find("kMaxGpuTargets"), std::string::npos) << f.error().message;
  auto p = run("perf", Json{{"model", "llama-2-7b"}, {"gpu", targets}});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, ErrorCode::kLimit);
  // A device count past int was std::stoi's out_of_range: an internal error (HTTP 500).
  auto huge = run("fit", Json{{"model", "llama-2-7b"}, {"gpu", "a100-80gb-sxm4x99999999999"}});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().code, ErrorCode::kUsage) << huge.error().message;
}

TEST(CommandLimits, OfferRows) {
  std::string csv =
      "provider,region,offer,gpu,gpus,interconnect,vcpus,ram_gb,price_hour,spot_price_hour,currency,available,"
      "captured_at,source\n";
  const std::string row = "p,r,o,a100-80gb-sxm4,8,nvlink,96,1152,30,,USD,,2026-11-01,s\n";
  for (int i = 0; i < 100001; ++i) csv += row;
  auto o = parse_offers(*catalog(), "offers.csv", csv);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error().code, ErrorCode::kLimit);
  EXPECT_NE(o.error().message.find("kMaxOfferRows"), std::string::npos) << o.error().message;
}

// A fleet where 30% of 10,000 GPUs hold a random valid layout, half of its instances busy (the
// busy benchmark of bench/mig_bench.cc), as YAML, and 40,000 requested instances.
std::pair<std::string, std::string> busy_fleet_yaml() {
  std::mt19937 rng(20261201);
  const char* gpus[] = {"a100-40gb-sxm4", "a100-80gb-sxm4", "h100-80gb-sxm5", "h200-141gb-sxm", "a30"};
  std::ostringstream fleet;
  fleet << "nodes:\n";
  for (int node = 0; node < 1250; ++node) {
    fleet << "  - name: node-" << node << "\n    gpus:\n";
    for (int g = 0; g < 8; ++g) {
      const char* target = gpus[rng() % 5];
      fleet << "      - target: " << target << "\n";
      if (rng() % 10 >= 3) continue;
      const MigTable& t = *catalog()->resolve(target)->mig_table;
      auto model = mig::table_model(t);
      const auto& layout = model->layouts[rng() % model->layouts.size()];
      if (layout.empty()) continue;
      fleet << "        instances:\n";
      for (const auto& p : layout) {
        fleet << "          - {profile: " << t.profiles[p.profile].name << ", start: " << p.start
              << ", busy: " << (rng() % 2 == 0 ? "true" : "false") << "}\n";
      }
    }
  }
  std::ostringstream req;
  req << "requests:\n";
  const char* kinds[] = {"memory_gb: 4, compute_slices: 1", "memory_gb: 9, compute_slices: 1",
                         "memory_gb: 9, compute_slices: 2", "memory_gb: 18, compute_slices: 3"};
  int units = 0;
  for (int i = 0; units < 40000; ++i) {
    const int count = 1 + static_cast<int>(rng() % 20);
    units += count;
    req << "  - {name: r" << i << ", priority: " << rng() % 3 << ", count: " << count << ", " << kinds[rng() % 4]
        << "}\n";
  }
  return {fleet.str(), req.str()};
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A generous bound: this tests that the packer stops at its deadline, not its speed. Uncancelled,
// the same input takes seconds.
constexpr double kCancelWallSeconds = 1.0;

TEST(Cancellation, MigPackStopsAtItsDeadline) {
  const auto [fleet, requests] = busy_fleet_yaml();
  const auto start = std::chrono::steady_clock::now();
  CancelToken token(start + std::chrono::milliseconds(50));
  CancelScope scope(&token);
  auto r = run("mig.pack", Json{{"fleet", fleet}, {"requests", requests}});
  const double wall = seconds_since(start);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kCancelled);
  EXPECT_LT(wall, kCancelWallSeconds);
}

// The planner's training search: offers x instance counts up to --max-instances x layouts (about
// 200,000 configurations a copy of the shipped snapshot; six copies take seconds uncancelled).
TEST(Cancellation, PlanStopsAtItsDeadline) {
  std::string snapshot;
  for (const auto& f : embedded_files()) {
    if (f.path == "data/offers/snapshot.csv") snapshot = std::string(f.contents);
  }
  ASSERT_FALSE(snapshot.empty());
  Json offers = Json::array();
  for (int i = 0; i < 6; ++i) offers.push_back(Json{{"name", "copy" + std::to_string(i) + ".csv"}, {"text", snapshot}});
  const Json request{{"model", "llama-2-7b"}, {"task", "lora"},        {"batch", 4},
                     {"context", 2048},       {"train_tokens", 1e9},   {"deadline", "30h"},
                     {"now", "2026-11-30"},   {"max_instances", 1024}, {"offers", offers}};
  const auto start = std::chrono::steady_clock::now();
  CancelToken token(start + std::chrono::milliseconds(50));
  CancelScope scope(&token);
  auto r = run("plan", request);
  const double wall = seconds_since(start);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kCancelled) << r.error().message;
  EXPECT_LT(wall, kCancelWallSeconds);
}

}  // namespace
}  // namespace gpuplan

// The MIG rules, each with the part of NVIDIA's MIG user guide it comes from:
//   [UG-prof]  supported-mig-profiles.html (profiles, max instances, +me notes)
//   [UG-conc]  concepts.html (memory/SM slices, partitioning, compute instances)
//   [UG-start] getting-started-with-mig.html (-lgip / -lgipp placements, creation order)
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "gpuplan/mig.h"
#include "mig/lp.h"
#include "mig/table_model.h"

namespace gpuplan::mig {
namespace {

const MigTable& table(const char* gpu) {
  static auto catalog = Catalog::embedded();
  auto ref = catalog->resolve(gpu);
  EXPECT_TRUE(ref.ok()) << gpu;
  return *ref->mig_table;
}

CheckResult check(const char* gpu, const char* layout) {
  auto entries = parse_layout(layout);
  EXPECT_TRUE(entries.ok());
  auto r = check_layout(table(gpu), *entries);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return *r;
}

// [UG-start] -lgipp: 3g.20gb placements {0,4}:4; a start elsewhere is refused.
TEST(MigRules, PlacementStartsComeFromTheTable) {
  EXPECT_EQ(check("a100-40gb-sxm4", "3g.20gb@2").rule, Rule::kPlacementStart);
  EXPECT_TRUE(check("a100-40gb-sxm4", "3g.20gb@4").valid);
  // 1g placements stop at 6: memory slice 7 is usable only by 2-, 4- or 8-slice profiles.
  EXPECT_EQ(check("h100-80gb-sxm5", "1g.10gb@7").rule, Rule::kPlacementStart);
}

// NVML: a new GPU instance fails when it overlaps occupied memory slices ([UG-conc] partitioning).
TEST(MigRules, InstancesMayNotOverlap) {
  const auto r = check("a100-40gb-sxm4", "4g.20gb@0,2g.10gb@2");
  EXPECT_EQ(r.rule, Rule::kOverlap);
  EXPECT_NE(r.reason.find("memory slices 2-3"), std::string::npos) << r.reason;
}

// [UG-prof] 'Number of Instances Available': 2 x 3g, 3 x 2g, 7 x 1g on A100/H100.
TEST(MigRules, MaxCountPerProfile) {
  EXPECT_EQ(check("a100-40gb-sxm4", "3g.20gb,3g.20gb,3g.20gb").rule, Rule::kMaxCount);
  EXPECT_EQ(check("a100-40gb-sxm4", "2g.10gb,2g.10gb,2g.10gb,2g.10gb").rule, Rule::kMaxCount);
  EXPECT_TRUE(check("a100-40gb-sxm4", "2g.10gb,2g.10gb,2g.10gb").valid);
}

// [UG-conc]: at most 7 instances (4 on A30) per GPU.
TEST(MigRules, MaxInstancesPerGpu) {
  EXPECT_TRUE(check("a30", "1g.6gb,1g.6gb,1g.6gb,1g.6gb").valid);
  EXPECT_FALSE(check("a30", "1g.6gb,1g.6gb,1g.6gb,1g.6gb,1g.6gb").valid);
}

// [UG-prof] +me rows: one media-extension instance per GPU (it takes the GPU's JPEG and OFA).
TEST(MigRules, OneMediaExtensionInstance) {
  EXPECT_TRUE(check("a100-40gb-sxm4", "1g.5gb+me,1g.5gb").valid);
  EXPECT_EQ(check("a30", "1g.6gb+me,2g.12gb+me").rule, Rule::kMediaExtensions);
}

// [UG-conc]: 7 SM slices; 4g + 3g uses all of them, 3g + 3g strands one ([UG-prof] fractions).
TEST(MigRules, ComputeSlicesAndStranding) {
  const auto r = check("a100-40gb-sxm4", "3g.20gb,3g.20gb");
  ASSERT_TRUE(r.valid);
  EXPECT_EQ(stranded(table("a100-40gb-sxm4"), r.placements).compute_slices, 1);
  EXPECT_EQ(check("a100-40gb-sxm4", "4g.20gb,2g.10gb,1g.5gb,1g.5gb").rule, Rule::kComputeSlices);
}

// [UG-start]: for 3-2-1-1 the 3g must be created first when the driver places; gpuplan creates the
// largest first and gives every placement explicitly (-cgi <id>:<start>).
TEST(MigRules, CreationOrderLargestFirstWithPlacements) {
  const auto r = check("a100-40gb-sxm4", "1g.5gb,1g.5gb,2g.10gb,3g.20gb");
  ASSERT_TRUE(r.valid);
  ASSERT_EQ(r.commands.size(), 1u);
  EXPECT_EQ(r.commands[0], "nvidia-smi mig -cgi 9:4,14:0,19:2,19:3 -C");
}

// [UG-conc] compute instances subdivide their GPU instance's SM slices.
TEST(MigRules, ComputeInstancesInsideAGpuInstance) {
  EXPECT_TRUE(check("a100-40gb-sxm4", "3g.20gb[1c,1c,1c]").valid);
  EXPECT_EQ(check("a100-40gb-sxm4", "2g.10gb[3c]").rule, Rule::kComputeInstance);
  const auto r = check("a100-40gb-sxm4", "3g.20gb@4[1c,2c]");
  ASSERT_TRUE(r.valid);
  ASSERT_EQ(r.commands.size(), 2u);
  EXPECT_NE(r.commands[1].find("-cci 0,1"), std::string::npos) << r.commands[1];
}

TEST(MigRules, UnknownProfileIsNotFound) {
  auto entries = parse_layout("3g.40gb");
  ASSERT_TRUE(entries.ok());
  auto r = check_layout(table("a100-40gb-sxm4"), *entries);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
}

TEST(MigRules, LayoutSyntaxErrorsAreUsageErrors) {
  EXPECT_FALSE(parse_layout("3g.20gb@").ok());
  EXPECT_FALSE(parse_layout("3g.20gb,,1g.5gb").ok());
  EXPECT_FALSE(parse_layout("3g.20gb[x]").ok());
}

// The counts in docs/mig.md (derived by exhaustive enumeration over the -lgipp placements): with
// 1g/2g/3g/4g/7g only, 37 combinations and 14 maximal; with the 2-slice 1g too, 77 and 38.
TEST(MigRules, CombinationCountsOnA100) {
  const MigTable& t = table("a100-40gb-sxm4");
  auto model = table_model(t);
  ASSERT_TRUE(model);
  // The reference's counting (shared/reference/mig.md section 3): a combination counts as maximal
  // when some placement of it leaves room for no further instance (a dead end, in mig.layouts terms).
  auto count = [&](const std::set<std::string>& allowed, bool maximal_only) {
    int n = 0;
    for (const auto& [counts, idx] : model->by_counts) {
      bool ok = std::any_of(counts.begin(), counts.end(), [](int c) { return c > 0; });
      for (size_t p = 0; p < counts.size(); ++p) ok = ok && (counts[p] == 0 || allowed.count(t.profiles[p].name));
      if (!ok) continue;
      bool maximal = false;
      for (int i : idx) {
        bool room = false;
        for (const auto& [other, oidx] : model->by_counts) {
          bool allowed_other = true;
          for (size_t p = 0; p < other.size(); ++p)
            allowed_other = allowed_other && (other[p] == 0 || allowed.count(t.profiles[p].name));
          if (!allowed_other) continue;
          for (int j : oidx) room = room || (j != i && (model->bits[j] & model->bits[i]) == model->bits[i]);
        }
        maximal = maximal || !room;
      }
      n += (!maximal_only || maximal) ? 1 : 0;
    }
    return n;
  };
  const std::set<std::string> basic = {"1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"};
  std::set<std::string> with_1g10 = basic;
  with_1g10.insert("1g.10gb");
  EXPECT_EQ(count(basic, false), 37);
  EXPECT_EQ(count(basic, true), 14);
  EXPECT_EQ(count(with_1g10, false), 77);
  EXPECT_EQ(count(with_1g10, true), 38);
  // Maximal as mig.layouts --maximal and the packer mean it: no valid combination of the allowed
  // profiles strictly contains it, whatever the placement. The reference's 14 include 3+2+1 and
  // 3+1+1+1 "with 3g at slot 0": placements that strand slice 7, while 3g at slot 4 takes another 1g.
  auto multiset_maximal = [&](const std::set<std::string>& allowed) {
    auto allowed_counts = [&](const std::vector<int>& c) {
      for (size_t p = 0; p < c.size(); ++p) {
        if (c[p] > 0 && !allowed.count(t.profiles[p].name)) return false;
      }
      return std::any_of(c.begin(), c.end(), [](int x) { return x > 0; });
    };
    int n = 0;
    for (const auto& [counts, idx] : model->by_counts) {
      if (!allowed_counts(counts)) continue;
      bool contained = false;
      for (const auto& [other, oidx] : model->by_counts) {
        if (other == counts || !allowed_counts(other)) continue;
        bool ge = true;
        for (size_t p = 0; p < counts.size(); ++p) ge = ge && other[p] >= counts[p];
        contained = contained || ge;
      }
      n += contained ? 0 : 1;
    }
    return n;
  };
  EXPECT_EQ(multiset_maximal(basic), 12);
  EXPECT_EQ(multiset_maximal(with_1g10), 28);
}

TEST(MigLp, SolvesASmallProblem) {
  // min x + y  s.t. x + 2y >= 4, 3x + y >= 6  -> x = 1.6, y = 1.2, objective 2.8
  lp::Problem p;
  p.columns = 2;
  p.cost = {1, 1};
  p.rows.push_back(lp::Row{{{0, 1}, {1, 2}}, lp::Sense::kGe, 4});
  p.rows.push_back(lp::Row{{{0, 3}, {1, 1}}, lp::Sense::kGe, 6});
  const auto s = lp::solve(p);
  ASSERT_TRUE(s.feasible);
  EXPECT_NEAR(s.objective, 2.8, 1e-9);
  // Duals: y1 + 3 y2 = 1 and 2 y1 + y2 = 1 -> 0.4 and 0.2 (4 * 0.4 + 6 * 0.2 = 2.8).
  ASSERT_EQ(s.duals.size(), 2u);
  EXPECT_NEAR(s.duals[0], 0.4, 1e-9);
  EXPECT_NEAR(s.duals[1], 0.2, 1e-9);
  // A <= row and an equality: min -x - y s.t. x <= 3, y = 2 -> duals -1 and -1.
  lp::Problem q;
  q.columns = 2;
  q.cost = {-1, -1};
  q.rows.push_back(lp::Row{{{0, 1}}, lp::Sense::kLe, 3});
  q.rows.push_back(lp::Row{{{1, 1}}, lp::Sense::kEq, 2});
  const auto t = lp::solve(q);
  ASSERT_TRUE(t.feasible);
  EXPECT_NEAR(t.duals[0], -1, 1e-9);
  EXPECT_NEAR(t.duals[1], -1, 1e-9);
  p.rows.push_back(lp::Row{{{0, 1}, {1, 1}}, lp::Sense::kLe, 1});
  EXPECT_FALSE(lp::solve(p).feasible);
}

}  // namespace
}  // namespace gpuplan::mig

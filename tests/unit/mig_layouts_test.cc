// mig.layouts --maximal against a brute force over multisets of profiles: a combination is maximal
// when no valid combination strictly contains it (the packer's notion, src/mig/pack.cc
// build_configs), whatever the placement. Placements that admit nothing more while the
// combination could still grow are dead ends (stranded capacity), listed beside it, never as maximal.
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "gpuplan/api.h"
#include "gpuplan/mig.h"
#include "mig/table_model.h"

namespace gpuplan::mig {
namespace {

std::shared_ptr<const Catalog> catalog() { return Catalog::embedded(); }

// Every MIG table of the catalog, with one GPU that uses it (mig.layouts takes a GPU).
std::vector<std::pair<std::string, const MigTable*>> tables() {
  std::vector<std::pair<std::string, const MigTable*>> out;
  std::set<std::string> seen;
  for (const auto& g : catalog()->gpus()) {
    if (g.mig_table.empty() || !seen.insert(g.mig_table).second) continue;
    out.push_back({g.id, catalog()->find_mig_table(g.mig_table)});
  }
  return out;
}

// Whether the multiset `counts` has a valid placement, asked of check_layout with no starts given
// (its own backtracking placement), not of the layout enumeration mig.layouts uses.
bool valid_multiset(const MigTable& t, const std::vector<int>& counts) {
  std::vector<LayoutEntry> entries;
  for (size_t p = 0; p < counts.size(); ++p) {
    for (int k = 0; k < counts[p]; ++k) entries.push_back(LayoutEntry{t.profiles[p].name, std::nullopt, {}});
  }
  auto r = check_layout(t, entries);
  return r.ok() && r->valid;
}

// Brute force: every count vector within the profiles' max counts; the valid ones; the maximal
// ones are those with no valid strict superset (checked against every valid vector, not only +1).
std::set<std::vector<int>> brute_force_maximal(const MigTable& t) {
  std::vector<std::vector<int>> valid;
  std::vector<int> c(t.profiles.size(), 0);
  std::function<void(size_t)> walk = [&](size_t p) {
    if (p == c.size()) {
      if (valid_multiset(t, c)) valid.push_back(c);
      return;
    }
    for (int k = 0; k <= t.profiles[p].max_count; ++k) {
      c[p] = k;
      walk(p + 1);
    }
    c[p] = 0;
  };
  walk(0);
  std::set<std::vector<int>> out;
  for (const auto& a : valid) {
    if (std::all_of(a.begin(), a.end(), [](int x) { return x == 0; })) continue;
    bool contained = false;
    for (const auto& b : valid) {
      bool ge = true, strict = false;
      for (size_t p = 0; p < a.size(); ++p) {
        ge = ge && b[p] >= a[p];
        strict = strict || b[p] > a[p];
      }
      contained = contained || (ge && strict);
    }
    if (!contained) out.insert(a);
  }
  return out;
}

std::vector<int> counts_of(const MigTable& t, const Json& placements) {
  std::vector<int> c(t.profiles.size(), 0);
  for (const auto& pl : placements) {
    for (size_t p = 0; p < t.profiles.size(); ++p) c[p] += t.profiles[p].name == pl["profile"] ? 1 : 0;
  }
  return c;
}

Json layouts(const std::string& gpu, bool maximal) {
  Context ctx{catalog()};
  auto r = run_command(ctx, "mig.layouts", Json{{"gpu", gpu}, {"maximal", maximal}});
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : Json::object();
}

TEST(MigLayouts, MaximalMatchesTheBruteForceOnEveryCatalogTable) {
  ASSERT_GE(tables().size(), 5u);
  for (const auto& [gpu, t] : tables()) {
    const std::set<std::vector<int>> expected = brute_force_maximal(*t);
    const Json r = layouts(gpu, true);
    std::set<std::vector<int>> got;
    for (const auto& l : r["layouts"]) {
      const std::vector<int> c = counts_of(*t, l);
      EXPECT_TRUE(expected.count(c)) << gpu << ": " << l.dump() << " is listed as maximal, but a valid layout "
                                     << "strictly contains it";
      got.insert(c);
    }
    EXPECT_EQ(got, expected) << gpu;
    EXPECT_EQ(r["count"].get<size_t>(), expected.size()) << gpu;
    EXPECT_TRUE(r["dead_ends"].empty()) << gpu << ": a maximal combination has no better placement to miss";
  }
}

// The case: 3g.20gb + 2g.10gb + 1g.5gb was listed among 64 "maximal" combinations, but a
// second 1g.5gb fits (3g@4, 2g@0, 1g at 2 and 3). 44 by the brute force above.
TEST(MigLayouts, A100CountAndTheReportedCombination) {
  const MigTable& t = *catalog()->resolve("a100-40gb-sxm4")->mig_table;
  const std::set<std::vector<int>> expected = brute_force_maximal(t);
  EXPECT_EQ(expected.size(), 44u);
  const Json r = layouts("a100-40gb-sxm4", true);
  EXPECT_EQ(r["count"].get<size_t>(), expected.size());
  auto entries = parse_layout("3g.20gb@0,2g.10gb@4,1g.5gb@6");
  ASSERT_TRUE(entries.ok());
  auto placed = check_layout(t, *entries);
  ASSERT_TRUE(placed.ok() && placed->valid);
  const std::vector<int> combination = profile_counts(t, placed->placements);
  for (const auto& l : r["layouts"]) EXPECT_NE(counts_of(t, l), combination) << l.dump();
  EXPECT_FALSE(is_maximal(t, placed->placements));
  EXPECT_TRUE(is_dead_end(t, placed->placements));  // slice 7 is free, and no 1g starts there

  // The full listing keeps it, with the placement that strands the least, and names the dead end.
  const Json all = layouts("a100-40gb-sxm4", false);
  bool found = false;
  for (size_t i = 0; i < all["layouts"].size(); ++i) {
    if (counts_of(t, all["layouts"][i]) != combination) continue;
    found = true;
    EXPECT_EQ(all["stranded"][i]["memory_slices"], 0) << all["layouts"][i].dump();
    bool dead_end = false;
    for (const auto& d : all["dead_ends"]) {
      if (d["layout"] != i) continue;
      dead_end = true;
      EXPECT_EQ(counts_of(t, d["placement"]), combination);
      EXPECT_EQ(d["stranded"]["memory_slices"], 1) << d.dump();
    }
    EXPECT_TRUE(dead_end);
  }
  EXPECT_TRUE(found);
}

// The table model's stranded capacity and maximal layouts (computed over one-instance extensions)
// equal the definition: over every pair of layouts, the best superset's memory and compute slices.
TEST(MigTableModel, StrandedAndMaximalEqualThePairwiseDefinition) {
  for (const auto& [gpu, table] : tables()) {
    auto m = table_model(*table);
    ASSERT_TRUE(m) << gpu;
    const size_t n = m->layouts.size();
    std::vector<int> mem(n, 0), compute(n, 0);
    for (size_t i = 0; i < n; ++i) {
      for (const auto& p : m->layouts[i]) {
        mem[i] += table->profiles[p.profile].memory_slices;
        compute[i] += table->profiles[p.profile].compute_slices;
      }
    }
    std::vector<int> maximal;
    for (size_t i = 0; i < n; ++i) {
      int best_mem = mem[i], best_compute = compute[i];
      bool is_max = true;
      for (size_t j = 0; j < n; ++j) {
        if ((m->bits[j] & m->bits[i]) != m->bits[i]) continue;
        if (m->bits[j] != m->bits[i]) is_max = false;
        best_mem = std::max(best_mem, mem[j]);
        best_compute = std::max(best_compute, compute[j]);
      }
      EXPECT_EQ(m->stranded[i].memory_slices, table->memory_slices - best_mem) << gpu << " layout " << i;
      EXPECT_EQ(m->stranded[i].compute_slices, table->compute_slices - best_compute) << gpu << " layout " << i;
      if (is_max) maximal.push_back(static_cast<int>(i));
    }
    EXPECT_EQ(m->maximal, maximal) << gpu;
  }
}

}  // namespace
}  // namespace gpuplan::mig

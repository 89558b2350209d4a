// mig pack against an ILP reference solved by GLPK (glpsol, Debian's glpk-utils): the configuration
// ILP  min sum x  s.t.  GPUs per type, slots per (type, profile) >= units placed there, every unit placed,
// with x and y integer. GLPK is the reference only; the production path has no solver dependency.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "gpuplan/mig_pack.h"
#include "mig/table_model.h"

namespace gpuplan::mig {
namespace {

bool have_glpsol() { return std::system("glpsol --version >/dev/null 2>&1") == 0; }

struct Case {
  Fleet fleet;
  std::vector<PackRequest> requests;
};

// The optimum GPU count from glpsol, or -1 when infeasible or glpsol failed.
int ilp_optimum(const Case& c) {
  std::map<std::string, std::pair<const MigTable*, int>> types;  // target -> (table, GPUs)
  for (const auto& g : c.fleet.gpus) {
    types[g.gpu->id].first = g.table;
    types[g.gpu->id].second++;
  }
  std::ostringstream obj, rows, bounds, ints;
  int xi = 0;
  std::map<std::pair<std::string, int>, std::string> slot_terms;  // (type, profile) -> "+ 2 x3 ..."
  std::ostringstream gpu_rows;
  for (const auto& [id, tp] : types) {
    auto model = table_model(*tp.first);
    std::string row;
    for (const auto& [counts, idx] : model->by_counts) {
      bool empty = true;
      for (int v : counts) empty = empty && v == 0;
      if (empty) continue;
      const std::string x = "x" + std::to_string(xi++);
      obj << " + " << x;
      row += " + " + x;
      ints << " " << x;
      for (size_t p = 0; p < counts.size(); ++p) {
        if (counts[p] > 0) slot_terms[{id, static_cast<int>(p)}] += " - " + std::to_string(counts[p]) + " " + x;
      }
    }
    gpu_rows << " g_" << xi << ": " << row << " <= " << tp.second << "\n";
  }
  std::map<std::pair<std::string, int>, std::string> unit_terms;
  int yi = 0;
  for (const auto& r : c.requests) {
    std::string row;
    for (const auto& [id, tp] : types) {
      int p = -1;
      if (r.kind == PackRequest::Kind::kProfile) {
        for (size_t i = 0; i < tp.first->profiles.size(); ++i) {
          if (tp.first->profiles[i].name == r.profile) p = static_cast<int>(i);
        }
      } else {
        p = smallest_profile_for(*tp.first, r.memory_gb, r.compute_slices).value_or(-1);
      }
      if (p < 0) continue;
      const std::string y = "y" + std::to_string(yi++);
      row += " + " + y;
      ints << " " << y;
      unit_terms[{id, p}] += " + " + y;
    }
    if (row.empty()) return -1;
    rows << " d_" << yi << ": " << row << " = " << r.count << "\n";
  }
  int si = 0;
  for (const auto& [key, units] : unit_terms) {
    rows << " s_" << si++ << ": " << units << slot_terms[key] << " <= 0\n";
  }
  const std::string lp = ::testing::TempDir() + "/mig_ilp.lp", out = ::testing::TempDir() + "/mig_ilp.out";
  {
    std::ofstream f(lp);
    f << "Minimize\n obj: " << obj.str() << "\nSubject To\n"
      << gpu_rows.str() << rows.str() << "General\n"
      << ints.str() << "\nEnd\n";
  }
  const std::string cmd = "glpsol --lp " + lp + " -o " + out + " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) return -1;
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (text.find("INTEGER OPTIMAL") == std::string::npos) return -1;
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(R"(Objective:\s+obj = ([0-9.eE+-]+))"))) return -1;
  return static_cast<int>(std::lround(std::stod(m[1])));
}

Case random_case(std::mt19937& rng, int gpus_per_type, int lines, int max_count) {
  auto catalog = Catalog::embedded();
  Case c;
  for (const char* t : {"a100-40gb-sxm4", "a100-80gb-sxm4", "a30"}) {
    auto ref = catalog->resolve(t);
    for (int i = 0; i < gpus_per_type; ++i) {
      c.fleet.gpus.push_back(FleetGpu{std::string("n-") + t, i, ref->gpu, ref->mig_table, {}});
    }
  }
  const std::vector<double> memory = {4, 9, 18, 22};
  for (int i = 0; i < lines; ++i) {
    PackRequest r;
    r.name = "r" + std::to_string(i);
    r.count = 1 + static_cast<int>(rng() % max_count);
    if (rng() % 4 == 0) {
      r.profile = std::vector<std::string>{"3g.20gb", "2g.20gb", "1g.6gb", "3g.40gb"}[rng() % 4];
    } else {
      r.kind = PackRequest::Kind::kResources;
      r.memory_gb = memory[rng() % memory.size()];
      r.compute_slices = 1 + static_cast<int>(rng() % 3);
    }
    c.requests.push_back(r);
  }
  return c;
}

// Returns the ILP optimum (-1: infeasible) after comparing pack with it.
int compare(const Case& c, int trial, int slack) {
  const int opt = ilp_optimum(c);
  auto r = pack(*Catalog::embedded(), c.fleet, c.requests, PackOptions{});
  EXPECT_TRUE(r.ok()) << r.error().message;
  if (!r.ok()) return opt;
  if (opt < 0) {
    EXPECT_FALSE(r->unplaced.empty()) << "trial " << trial << ": the ILP says not everything fits";
    return opt;
  }
  EXPECT_TRUE(r->unplaced.empty()) << "trial " << trial;
  EXPECT_LE(r->lower_bound, opt) << "trial " << trial;
  EXPECT_LE(r->gpus_used, opt + slack) << "trial " << trial;
  EXPECT_GE(r->gpus_used, opt) << "trial " << trial;
  return opt;
}

TEST(MigGlpk, SmallMixedFleetsMatchTheIlpOptimum) {
  if (!have_glpsol()) GTEST_SKIP() << "glpsol not installed (apt-get install glpk-utils)";
  std::mt19937 rng(5);
  int solved = 0;
  for (int trial = 0; trial < 20; ++trial) solved += compare(random_case(rng, 3, 4, 4), trial, 0) >= 0 ? 1 : 0;
  EXPECT_GE(solved, 10) << "most cases should fit, or the reference is not being exercised";
}

TEST(MigGlpk, LargerFleetsMatchTheIlpOptimum) {
  if (!have_glpsol()) GTEST_SKIP() << "glpsol not installed (apt-get install glpk-utils)";
  std::mt19937 rng(9);
  int solved = 0;
  for (int trial = 0; trial < 5; ++trial) solved += compare(random_case(rng, 40, 25, 12), trial, 0) >= 0 ? 1 : 0;
  EXPECT_GE(solved, 3);
}

}  // namespace
}  // namespace gpuplan::mig

// The packing search. Small problems: an exact memoized search over (remaining demand, remaining
// GPUs). Large ones: the configuration LP (Gilmore-Gomory style, all maximal configurations
// enumerated), its floor taken as whole GPUs, and the small residual solved exactly or by LP dives.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <numeric>
#include <string>
#include <unordered_map>

#include "gpuplan/cancel.h"
#include "mig/lp.h"
#include "mig/pack_model.h"

namespace gpuplan::mig {

namespace {

// Tie-break weight of one stranded slice in the LP, in GPUs: a GPU strands at most 15 slices, so
// the weight stays far below one GPU and only orders equal-GPU solutions.
constexpr double kStrandedCostPerSlice = 1e-3;
// Rounding slack when taking the floor of LP values (the simplex tolerance is 1e-9).
constexpr double kFloorSlack = 1e-6;
// The exact search is tried on problems (or residuals) with at most this many units; the state
// limit (PackOptions) stops it when the state space is larger than it looks.
constexpr int kExactMaxUnits = 64;
// ... and on at most this many GPU classes with GPUs left (each class multiplies the state space).
constexpr int kExactMaxClasses = 8;
// Fills the exact search may evaluate before it gives up (a few tens of milliseconds); with the state
// limit this keeps it from stalling on residuals that look small but are not.
constexpr long long kExactWorkLimit = 200000;
// With more classes of pinned GPUs (busy instances kept, --keep-existing) than this, pinned GPUs are
// filled greedily before the LP instead of inside it: each class adds a row and its configurations,
// and they cost nothing to use.
constexpr int kMaxLpPinnedClasses = 32;
// Configurations a dive step tries (largest LP value first) before it gives up on keeping the rest
// of the demand LP-feasible; the residuals where dives run are small, so a handful suffices.
constexpr size_t kDiveCandidates = 8;
// See `big` in run_lp: 2 x (units + 1) per tier keeps the tiers lexicographic in one LP objective.
constexpr double kTierWeightFactor = 2.0;

// Placed per tier (most important first), -GPUs, busy instances kept in place, -stranded.
using Value = std::vector<long long>;
// The entries of a Value after its tiers, in that order of importance.
constexpr int kValueGpus = 0, kValueKept = 1, kValueStranded = 2, kValueExtras = 3;

int total(const std::vector<int>& v) { return std::accumulate(v.begin(), v.end(), 0); }

int option_for(const DemandClass& d, int target) {
  for (const auto& o : d.options) {
    if (o.target == target) return o.profile;
  }
  return -1;
}

// ---------------------------------------------------------------------------------------------
// Exact search.

// Memo keys are bit strings of this many bits: the remaining count per demand class and per GPU
// class, each in the bits its starting value needs. At most kExactMaxUnits units need at most 64
// bits (a count c takes bit_width(c) <= c bits) and kExactMaxClasses classes of at most
// kExactMaxUnits GPUs 8 x 7 = 56 more, so 128 always suffice.
constexpr int kStateKeyBits = 128;
// A fill's entries packed into one key for deduplication: profile index (a MIG table has at most 8
// profiles: kMaxPlacementBits), demand class, amount (a GPU holds at most 7 instances).
constexpr int kFillProfileBits = 5, kFillClassBits = 10, kFillAmountBits = 3;
constexpr int kFillEntryBits = kFillProfileBits + kFillClassBits + kFillAmountBits;
// Bits per profile count in a configuration's lookup key: a GPU holds at most 7 instances of a profile.
constexpr size_t kCountBits = 4;

struct StateKey {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const StateKey& o) const { return lo == o.lo && hi == o.hi; }
};

struct StateKeyHash {
  size_t operator()(const StateKey& k) const {
    // splitmix64's finalizer over both words (Steele et al. 2014): packed counts differ in low bits.
    uint64_t x = k.lo ^ (k.hi * 0x9E3779B97F4A7C15ULL);
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    x ^= x >> 31;
    return static_cast<size_t>(x);
  }
};

// Sets `width` bits of `k` at bit `pos` to `v` (v < 2^width, width <= 64, pos + width <= 128).
void put_bits(StateKey& k, int pos, int width, uint64_t v) {
  if (width == 0) return;
  if (pos < 64) {
    k.lo |= v << pos;
    if (pos + width > 64) k.hi |= v >> (64 - pos);
  } else {
    k.hi |= v << (pos - 64);
  }
}

// A set of StateKeys for one state's fills: open addressing in a table that is kept between uses
// (clear() starts a new generation instead of touching every slot), so that inserting allocates
// nothing once the table has grown to the largest state's fill count.
class KeySet {
 public:
  void clear() {
    ++generation_;
    count_ = 0;
    if (generation_ == 0) {  // wrapped: every stamp may look current
      std::fill(stamp_.begin(), stamp_.end(), 0);
      generation_ = 1;
    }
  }
  // False when `k` was already in.
  bool insert(const StateKey& k) {
    if ((count_ + 1) * 2 > keys_.size()) grow();
    const size_t mask = keys_.size() - 1;
    for (size_t i = StateKeyHash{}(k)&mask;; i = (i + 1) & mask) {
      if (stamp_[i] != generation_) {
        stamp_[i] = generation_;
        keys_[i] = k;
        ++count_;
        return true;
      }
      if (keys_[i] == k) return false;
    }
  }

 private:
  void grow() {
    std::vector<StateKey> old;
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (stamp_[i] == generation_) old.push_back(keys_[i]);
    }
    keys_.assign(std::max<size_t>(kFirstSlots, keys_.size() * 2), StateKey{});
    stamp_.assign(keys_.size(), 0);
    generation_ = 1;
    count_ = 0;
    for (const StateKey& k : old) insert(k);
  }
  // Slots of a new table (a power of two): a state has a few dozen distinct fills.
  static constexpr size_t kFirstSlots = 64;
  std::vector<StateKey> keys_;
  std::vector<uint32_t> stamp_;  // generation_ where the slot is used
  uint32_t generation_ = 1;
  size_t count_ = 0;
};

// Packs (remaining demand, remaining GPUs) into a StateKey; widths come from the search's start.
class KeyPacker {
 public:
  // False when the counts need more than kStateKeyBits bits (never within the exact search's bounds).
  bool init(const std::vector<int>& r, const std::vector<int>& n) {
    fields_.clear();
    int bits = 0;
    for (int side = 0; side < 2; ++side) {
      const std::vector<int>& v = side == 0 ? r : n;
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i] <= 0) continue;  // stays 0 in every state: no bits
        const int w = static_cast<int>(std::bit_width(static_cast<unsigned>(v[i])));
        fields_.push_back(Field{side, static_cast<int>(i), bits, w});
        bits += w;
      }
    }
    return bits <= kStateKeyBits;
  }
  StateKey pack(const std::vector<int>& r, const std::vector<int>& n) const {
    StateKey k;
    for (const Field& f : fields_) put_bits(k, f.pos, f.width, static_cast<uint64_t>((f.side == 0 ? r : n)[f.index]));
    return k;
  }

 private:
  struct Field {
    int side;   // 0: demand class, 1: GPU class
    int index;  // its index
    int pos;    // first bit
    int width;  // bits
  };
  std::vector<Field> fields_;  // the counts that are not 0 at the start, in order
};

// A unit's shares of one GPU (memory slices, compute slices, instances), or their sums over units, in
// units of 1 / Exact::slice_denominator_ GPU.
using SliceSums = std::array<long long, 3>;
// A need that every value meets (far below any value, and safe to subtract a value from).
constexpr long long kNoNeed = std::numeric_limits<long long>::min() / 4;
// The shares' common denominator stays below this (the catalog's tables need 840 = lcm(4, 7, 8)); a
// table whose counts would pass it gets no shares (0: a weaker bound, still a bound).
constexpr long long kMaxSliceDenominator = 1LL << 20;
// Passes of the exact search with a need above the optimum (each failed one lowers it to the bound it
// proved) before the need drops to nothing: on the benchmark fleets and the example the optimum is
// found by the second pass; more passes re-search the same states for small steps of the need.
constexpr int kAspirationPasses = 3;

class Exact {
 public:
  // Classes with busy instances try every configuration (taking fewer units can keep more of them);
  // the others only the maximal ones.
  Exact(const PackModel& m, int limit)
      : m_(m),
        limit_(limit),
        options_(m.classes.size()),
        demand_profile_(m.classes.size()),
        stranded_by_counts_(m.classes.size()),
        stranded_ready_(m.classes.size(), 0),
        zero_(static_cast<size_t>(m.tiers) + kValueExtras, 0) {
    init_slice_costs();
    // Interchangeable demand classes: not busy, the same options (so the same profile on every target),
    // hence different priority tiers (classes are keyed by tier and options).
    std::map<std::vector<std::pair<int, int>>, std::vector<int>> by_options;
    for (size_t k = 0; k < m.demands.size(); ++k) {
      if (m.demands[k].busy) continue;
      std::vector<std::pair<int, int>> key;
      for (const Option& o : m.demands[k].options) key.emplace_back(o.target, o.profile);
      by_options[key].push_back(static_cast<int>(k));
    }
    same_options_.assign(m.demands.size(), -1);
    int groups = 0;
    for (const auto& [key, members] : by_options) {
      if (members.size() < 2) continue;
      for (int k : members) same_options_[static_cast<size_t>(k)] = groups;
      ++groups;
      has_groups_ = true;
    }
    for (size_t g = 0; g < m.classes.size(); ++g) {
      const GpuClass& gc = m.classes[g];
      for (const auto& d : m.demands) demand_profile_[g].push_back(option_for(d, gc.target));
      if (gc.busy.empty()) {
        for (const auto& c : gc.configs) options_[g].push_back(&c);
        continue;
      }
      for (const auto& [counts, c] : gc.all) {
        if (std::any_of(counts.begin(), counts.end(), [](int v) { return v > 0; })) options_[g].push_back(&c);
      }
    }
  }

  // slice_cost_ and slice_denominator_ from the targets' tables.
  void init_slice_costs() {
    auto totals = [](const MigTable& t) {
      return std::array<int, 3>{t.memory_slices, t.compute_slices, t.max_instances};
    };
    for (const PackTarget& pt : m_.targets) {
      for (int v : totals(*pt.table)) {
        if (v > 0 && std::lcm(slice_denominator_, static_cast<long long>(v)) <= kMaxSliceDenominator)
          slice_denominator_ = std::lcm(slice_denominator_, static_cast<long long>(v));
      }
    }
    for (const PackTarget& pt : m_.targets) {
      const std::array<int, 3> whole = totals(*pt.table);
      std::vector<SliceSums>& per = slice_cost_.emplace_back();
      for (const MigProfile& p : pt.table->profiles) {
        const std::array<int, 3> used{p.memory_slices, p.compute_slices, 1};
        SliceSums c{};
        for (size_t i = 0; i < c.size(); ++i) {
          if (whole[i] > 0 && slice_denominator_ % whole[i] == 0) c[i] = used[i] * (slice_denominator_ / whole[i]);
        }
        per.push_back(c);
      }
    }
  }

  // The work half of the cost model: the fills the search would evaluate, estimated from above as,
  // per class, its states (exact_state_bound) x the fills one of them evaluates at the full demand `r`
  // (a state's demand is at most r, and fewer units leave fewer ways to fill a GPU). Stops counting
  // past `stop`.
  double work_bound(const std::vector<int>& r, const std::vector<int>& n, double stop) const {
    std::vector<double> per_class;
    exact_state_bound(m_, r, n, &per_class);
    double work = 0;
    for (size_t g = 0; g < n.size() && g < m_.classes.size() && work <= stop; ++g) {
      if (n[g] <= 0 || per_class[g] <= 0) continue;
      const Takers takers = takers_of(static_cast<int>(g), r);
      for (const Config* c : options_[g]) {
        long long count = 0;
        // (Every split, as before the search skipped non-greedy ones: the same searches run.)
        for_each_fill(
            *c, r, takers, [&count](const Fill&) { ++count; }, false);
        work += per_class[g] * static_cast<double>(count + 1);
        if (work > stop) break;
      }
    }
    return work;
  }

  // False when the state limit was hit.
  bool run(const std::vector<int>& r, const std::vector<int>& n, std::vector<Bin>* bins) {
    if (!packer_.init(r, n)) aborted_ = true;
    // The root's need starts at its upper bound and drops to the bound each failed search returns (each
    // is below the last and at least the optimum), so the search that succeeds finds the optimum; the
    // memo keeps what each search proved for the next.
    // After kAspirationPasses failed passes the need drops to nothing. Bounds can cost more than they
    // save (a state searched again for each lower need); a bounded search that runs out of its limits
    // starts over without bounds, as the cost model (which counts the search without them) allowed.
    long long work = 0, states = 0;
    if (!aborted_) {
      Scratch top;
      state_bound(r, n, top);
      Value need = top.ub;
      for (int pass = 1;; ++pass) {
        const Value got = solve(r, n, need);
        if (aborted_ || got >= need) break;
        need = pass < kAspirationPasses ? got : Value(zero_.size(), kNoNeed);
      }
      if (aborted_ && !cancel_requested()) {
        work += work_;
        states += static_cast<long long>(memo_.size());
        memo_.clear();
        work_ = 0;
        aborted_ = false;
        bounded_ = false;
        solve(r, n, Value(zero_.size(), kNoNeed));
      }
    }
    if (m_.stats) {
      ++(aborted_ ? m_.stats->exact_aborted : m_.stats->exact_runs);
      m_.stats->exact_states += states + static_cast<long long>(memo_.size());
      m_.stats->exact_work += work + work_;
    }
    if (aborted_) return false;
    rebuild(r, n, bins);
    return true;
  }

 private:
  struct Fill {
    std::vector<std::pair<int, int>> units;  // per profile index order: (class, amount) flattened below
    std::vector<int> profile_of;             // profile per entry of units
    std::vector<int> counts;                 // filled counts per profile
  };
  struct Entry {
    Value value;          // the optimum (exact) or an upper bound on it
    bool exact = true;    // false: only an upper bound, below the need it was searched for
    int gpu_class = -1;   // -1: terminal
    int config = -1;      // -1: skip the rest of this class
    long long fill = -1;  // the chosen fill's ordinal in the walk of `config` (rebuild walks it again)
  };

  // The demand classes that take one profile (a fixed array: at most kExactMaxUnits have units left).
  struct Classes {
    std::array<int, kExactMaxUnits> at;
    size_t size = 0;
    int avail = 0;  // their units left
    bool empty() const { return size == 0; }
    int back() const { return at[size - 1]; }
  };
  // Per profile of a GPU class: the demand classes with units left that take it, found once per
  // state (the fill walk visits each profile once per split of the profiles before it).
  using Takers = std::vector<Classes>;

  Takers takers_of(int g, const std::vector<int>& r) const {
    const size_t profiles = m_.targets[m_.classes[g].target].table->profiles.size();
    Takers t(profiles);
    for (Classes& c : t) c.size = 0;
    const std::vector<int>& profile_of = demand_profile_[g];
    for (size_t k = 0; k < m_.demands.size() && k < r.size(); ++k) {
      const int p = profile_of[k];
      if (r[k] <= 0 || p < 0 || static_cast<size_t>(p) >= profiles) continue;
      Classes& c = t[static_cast<size_t>(p)];
      if (c.size >= c.at.size()) continue;
      c.at[c.size++] = static_cast<int>(k);
      c.avail += r[k];
    }
    return t;
  }

  StateKey key(const std::vector<int>& r, const std::vector<int>& n) const { return packer_.pack(r, n); }

  static void add(Value& a, const Value& b) {
    for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  }

  // Every maximal fill of `config` from the remaining demand.
  // Calls visit(fill) for every maximal fill of `config` from the remaining demand, in one order:
  // profile by profile, every split of the profile's slots over the demand classes that take it
  // (largest first), the last class taking what is left. The fill is the walk's own (copy to keep).
  template <typename Visit>
  // With `greedy_only`, only the splits that give interchangeable classes (same_options_) their slots
  // most important first: a class of such a group takes units only when every more important one takes
  // all it has left. Some optimal plan has only such fills (the group's units are placed most important
  // first, or swapping one would place a more important unit, and which of the group's slots each
  // takes changes no GPU's layout), so the search loses nothing by skipping the others.
  void for_each_fill(const Config& config, const std::vector<int>& r, const Takers& takers, Visit&& visit,
                     bool greedy_only = true) const {
    // The walk's fill, one per depth of solve()'s recursion (a visit may start the next depth's walks),
    // kept between walks so that their vectors are not allocated again.
    if (walk_depth_ >= fills_.size()) fills_.emplace_back();
    Fill& cur = fills_[walk_depth_++];
    cur.units.clear();
    cur.profile_of.clear();
    cur.counts.assign(config.counts.size(), 0);
    struct Leave {
      size_t& depth;
      ~Leave() { --depth; }
    } leave{walk_depth_};
    FillWalk<Visit> walk{config, r, takers, cur, visit, greedy_only && has_groups_, {}};
    by_profile(walk, 0);
  }

  template <typename Visit>
  struct FillWalk {
    const Config& config;
    const std::vector<int>& r;
    const Takers& takers;
    Fill& cur;
    Visit& visit;
    bool greedy_only;
    std::array<int, kExactMaxUnits> took;  // per position in the profile's takers: the units given so far
  };

  // Whether giving `a` units to the taker at position i keeps the split greedy within its group, given
  // what the positions before it took.
  template <typename W>
  bool greedy(const W& w, const Classes& comp, size_t i, int a) const {
    const int x = comp.at[i];
    const int gx = same_options_[static_cast<size_t>(x)];
    if (gx < 0) return true;
    for (size_t j = 0; j < i; ++j) {
      const int y = comp.at[j];
      if (same_options_[static_cast<size_t>(y)] != gx) continue;
      const bool y_first = std::pair(m_.demands[y].tier, y) < std::pair(m_.demands[x].tier, x);
      if (y_first ? (a > 0 && w.took[j] < w.r[y]) : (w.took[j] > 0 && a < w.r[x])) return false;
    }
    return true;
  }

  template <typename W>
  void by_profile(W& w, size_t p) const {
    if (p == w.config.counts.size()) {
      w.visit(static_cast<const Fill&>(w.cur));
      return;
    }
    if (w.config.counts[p] == 0) return by_profile(w, p + 1);
    static const Classes kNone{};
    const Classes& comp = p < w.takers.size() ? w.takers[p] : kNone;
    const int want = std::min(comp.avail, w.config.counts[p]);
    split(w, p, comp, want, 0, want);
    w.cur.counts[p] = 0;
  }

  template <typename W>
  void split(W& w, size_t p, const Classes& comp, int want, size_t i, int left) const {
    Fill& cur = w.cur;
    if (i + 1 >= comp.size) {
      if (!comp.empty() && left > w.r[comp.back()]) return;
      if (w.greedy_only && !comp.empty() && !greedy(w, comp, comp.size - 1, left)) return;
      if (!comp.empty() && left > 0) {
        cur.units.emplace_back(comp.back(), left);
        cur.profile_of.push_back(static_cast<int>(p));
      }
      cur.counts[p] = want;
      by_profile(w, p + 1);
      if (!comp.empty() && left > 0) {
        cur.units.pop_back();
        cur.profile_of.pop_back();
      }
      return;
    }
    for (int a = std::min(left, w.r[comp.at[i]]); a >= 0; --a) {
      if (w.greedy_only) {
        if (!greedy(w, comp, i, a)) continue;
        w.took[i] = a;
      }
      if (a > 0) {
        cur.units.emplace_back(comp.at[i], a);
        cur.profile_of.push_back(static_cast<int>(p));
      }
      split(w, p, comp, want, i + 1, left - a);
      if (a > 0) {
        cur.units.pop_back();
        cur.profile_of.pop_back();
      }
    }
  }

  // (The lookup of a class is built on its first use: most searches open GPUs of a few classes only,
  // and the cost model's Exact opens none.)
  int stranded_of(int g, const std::vector<int>& counts) const {
    if (!stranded_ready_[g]) {
      stranded_ready_[g] = 1;
      for (const auto& [all_counts, c] : m_.classes[g].all) {
        if (uint64_t key = 0; pack_counts(all_counts, &key)) stranded_by_counts_[g].emplace(key, c.stranded);
      }
    }
    if (uint64_t key = 0; pack_counts(counts, &key)) {
      auto it = stranded_by_counts_[g].find(key);
      return it == stranded_by_counts_[g].end() ? 0 : it->second;
    }
    auto it = m_.classes[g].all.find(counts);
    return it == m_.classes[g].all.end() ? 0 : it->second.stranded;
  }

  // Instance counts per profile in kCountBits each (false when they do not fit 64 bits).
  static bool pack_counts(const std::vector<int>& counts, uint64_t* key) {
    if (counts.size() * kCountBits > 64) return false;
    uint64_t k = 0;
    for (size_t p = 0; p < counts.size(); ++p) {
      if (counts[p] < 0 || counts[p] >= (1 << kCountBits)) return false;
      k |= static_cast<uint64_t>(counts[p]) << (p * kCountBits);
    }
    *key = k;
    return true;
  }

  // Busy instances a fill keeps in place (with the class's busy set) and the stranded slices of its layout.
  std::pair<int, int> kept_and_stranded(int g, const Fill& f) const {
    const GpuClass& gc = m_.classes[g];
    if (gc.busy.empty()) return {0, stranded_of(g, f.counts)};
    std::vector<int>& busy_units = busy_units_;
    busy_units.assign(f.counts.size(), 0);
    for (size_t i = 0; i < f.units.size(); ++i) {
      if (m_.demands[f.units[i].first].busy) busy_units[f.profile_of[i]] += f.units[i].second;
    }
    const KeepEval e = best_keeping_layout(*m_.targets[gc.target].model, gc.busy, f.counts, busy_units);
    return {e.kept, e.stranded};
  }

  // A fill as 128 bits: (profile, class, amount) per entry in kFillEntryBits each; false when it does
  // not fit (then fills are not deduplicated, which only costs time: equal fills have equal values).
  static bool fill_key(const Fill& f, StateKey* out) {
    StateKey k;
    int pos = 0;
    for (size_t i = 0; i < f.units.size(); ++i) {
      const int p = f.profile_of[i], c = f.units[i].first, a = f.units[i].second;
      if (p >= (1 << kFillProfileBits) || c >= (1 << kFillClassBits) || a >= (1 << kFillAmountBits)) return false;
      if (pos + kFillEntryBits > kStateKeyBits) return false;
      const uint64_t v = (static_cast<uint64_t>(p) << (kFillClassBits + kFillAmountBits)) |
                         (static_cast<uint64_t>(c) << kFillAmountBits) | static_cast<uint64_t>(a);
      put_bits(k, pos, kFillEntryBits, v);
      pos += kFillEntryBits;
    }
    *out = k;
    return true;
  }

  // solve()'s working values at one depth of its recursion (kept between states so that a state
  // allocates nothing once the depths exist): the state's upper bound and what it is made of, the fill
  // being evaluated, the best so far, and the fills already seen.
  struct Scratch {
    KeySet seen;
    Value ub;      // upper bound on the state's optimum (state_bound)
    Value w;       // the fill's own value
    Value bound;   // upper bound on a branch: w plus the bound on what follows it
    Value t;       // what a branch must reach to matter: max(need, just above the best so far)
    Value child;   // t - w: the child's need
    Value v;       // a branch's value (or bound)
    Value best;    // the best branch's value
    Value ub_acc;  // the largest bound of the branches that did not reach t
    SliceSums sums{};
    int pinned = 0;               // pinned GPUs left (they cost no GPU)
    long long kept = 0;           // busy instances on the GPUs left: the most a plan can keep
    std::vector<SliceSums> cost;  // per demand class: its least slice shares on a GPU left
    std::vector<char> avail;      // per target: some class of it has GPUs left
    std::vector<int> r2, n2;
  };

  // The GPUs any plan from (sums, pinned) needs besides the pinned ones: each unit takes at least its
  // share of a GPU's memory slices, compute slices and instances, and a GPU holds one of each whole.
  long long gpus_needed(const SliceSums& sums, int pinned) const {
    const long long most = std::max({sums[0], sums[1], sums[2]});
    return std::max(0LL, (most + slice_denominator_ - 1) / slice_denominator_ - pinned);
  }

  // An upper bound (lexicographic) on the value of any plan from (r, n), into s.ub, with what the
  // fills' bounds reuse: every unit that some GPU left can take placed, on the fewest GPUs their
  // slices allow (gpus_needed), keeping every busy instance on those GPUs, stranding nothing.
  void state_bound(const std::vector<int>& r, const std::vector<int>& n, Scratch& s) const {
    s.avail.assign(m_.targets.size(), 0);
    s.pinned = 0;
    s.kept = 0;
    for (size_t g = 0; g < n.size() && g < m_.classes.size(); ++g) {
      if (n[g] <= 0) continue;
      const GpuClass& gc = m_.classes[g];
      s.avail[static_cast<size_t>(gc.target)] = 1;
      s.pinned += gc.pinned ? n[g] : 0;
      s.kept += static_cast<long long>(n[g]) * static_cast<long long>(gc.busy.size());
    }
    s.ub.assign(zero_.size(), 0);
    s.sums = SliceSums{};
    s.cost.assign(m_.demands.size(), SliceSums{});
    for (size_t k = 0; k < m_.demands.size() && k < r.size(); ++k) {
      if (r[k] <= 0) continue;
      bool any = false;
      SliceSums least{};
      for (const Option& o : m_.demands[k].options) {
        if (!s.avail[static_cast<size_t>(o.target)]) continue;
        const SliceSums& c = slice_cost_[static_cast<size_t>(o.target)][static_cast<size_t>(o.profile)];
        for (size_t i = 0; i < least.size(); ++i) least[i] = any ? std::min(least[i], c[i]) : c[i];
        any = true;
      }
      if (!any) continue;
      s.cost[k] = least;
      s.ub[static_cast<size_t>(m_.demands[k].tier)] += r[k];
      for (size_t i = 0; i < least.size(); ++i) s.sums[i] += r[k] * least[i];
    }
    s.ub[static_cast<size_t>(m_.tiers) + static_cast<size_t>(kValueGpus)] = -gpus_needed(s.sums, s.pinned);
    s.ub[static_cast<size_t>(m_.tiers) + static_cast<size_t>(kValueKept)] = s.kept;
  }

  // a = max(a, b), lexicographically.
  static void max_into(Value& a, const Value& b) {
    if (a < b) a = b;
  }

  Entry& store(const StateKey& k, Entry e) { return memo_.insert_or_assign(k, std::move(e)).first->second; }

  // The search at (r, n) for a caller that only needs values of at least `need` (branch and bound):
  // the optimum when it is at least `need` (its entry is then exact and holds the plan: the first
  // best fill in walk order, or skipping the class when that is as good, as without bounds), else an
  // upper bound on the optimum below `need` (an inexact entry, searched again for a lower need).
  // Branches whose bound (state_bound after the fill) cannot reach the need, or beat the best so far,
  // are not searched.
  const Value& solve(const std::vector<int>& r, const std::vector<int>& n, const Value& need) {
    const StateKey k = key(r, n);
    if (auto it = memo_.find(k); it != memo_.end() && (it->second.exact || it->second.value < need)) {
      return it->second.value;
    }
    Entry entry;
    entry.value = zero_;
    if (aborted_ || memo_.size() > static_cast<size_t>(limit_) || work_ > kExactWorkLimit || cancel_requested()) {
      aborted_ = true;
      return store(k, std::move(entry)).value;
    }
    int g = -1;
    for (size_t i = 0; i < n.size() && g < 0; ++i) {
      if (n[i] > 0) g = static_cast<int>(i);
    }
    if (g < 0 || total(r) == 0) return store(k, std::move(entry)).value;
    if (solve_depth_ >= scratch_.size()) {
      Scratch& fresh = scratch_.emplace_back();
      for (Value* v : {&fresh.w, &fresh.bound, &fresh.t, &fresh.child, &fresh.v, &fresh.best}) *v = zero_;
    }
    Scratch& s = scratch_[solve_depth_++];
    struct Leave {
      size_t& depth;
      ~Leave() { --depth; }
    } leave{solve_depth_};
    state_bound(r, n, s);
    if (bounded_ && s.ub < need) {
      entry.value = s.ub;
      entry.exact = false;
      return store(k, std::move(entry)).value;
    }
    const GpuClass& gc = m_.classes[g];
    const size_t gpus_at = static_cast<size_t>(m_.tiers) + static_cast<size_t>(kValueGpus);
    const size_t kept_at = static_cast<size_t>(m_.tiers) + static_cast<size_t>(kValueKept);
    const size_t stranded_at = static_cast<size_t>(m_.tiers) + static_cast<size_t>(kValueStranded);
    const int pinned_after = s.pinned - (gc.pinned ? 1 : 0);
    const long long kept_after = s.kept - static_cast<long long>(gc.busy.size());
    bool have_best = false;
    s.t = need;
    s.ub_acc.assign(zero_.size(), kNoNeed);
    s.r2 = r;  // the demand after a fill (restored after each)
    s.n2 = n;
    s.n2[static_cast<size_t>(g)] = n[static_cast<size_t>(g)] - 1;
    // Fills of different configurations coincide where the demand is below their slots (equal fills
    // have equal values: the first one is kept).
    s.seen.clear();
    const Takers takers = takers_of(g, r);
    for (size_t c = 0; c < options_[g].size(); ++c) {
      ++work_;
      long long ordinal = -1;
      for_each_fill(*options_[g][c], r, takers, [&](const Fill& f) {
        ++work_;  // counted as evaluated, before the states below it
        ++ordinal;
        if (f.units.empty() && !gc.pinned) return;
        StateKey fk;
        if (fill_key(f, &fk) && !s.seen.insert(fk)) return;
        std::fill(s.w.begin(), s.w.end(), 0);
        SliceSums left = s.sums;
        for (const auto& [cls, amount] : f.units) {
          s.r2[cls] -= amount;
          s.w[static_cast<size_t>(m_.demands[cls].tier)] += amount;
          for (size_t i = 0; i < left.size(); ++i) left[i] -= amount * s.cost[cls][i];
        }
        s.w[gpus_at] -= gc.pinned ? 0 : 1;
        const auto [kept, stranded] = kept_and_stranded(g, f);
        s.w[kept_at] += kept;
        s.w[stranded_at] -= stranded;
        // The branch's bound: every unit the state can place (the fill's and the rest's), the fill's
        // GPU and those the rest needs, the busy instances kept and those left, the fill's stranding.
        for (size_t i = 0; i < static_cast<size_t>(m_.tiers); ++i) s.bound[i] = s.ub[i];
        s.bound[gpus_at] = s.w[gpus_at] - gpus_needed(left, pinned_after);
        s.bound[kept_at] = s.w[kept_at] + kept_after;
        s.bound[stranded_at] = s.w[stranded_at];
        if (bounded_ && s.bound < s.t) {
          max_into(s.ub_acc, s.bound);
        } else {
          for (size_t i = 0; i < s.t.size(); ++i) s.child[i] = s.t[i] - s.w[i];
          const Value& rest = solve(s.r2, s.n2, s.child);
          for (size_t i = 0; i < s.v.size(); ++i) s.v[i] = s.w[i] + rest[i];
          // (Without bounds, s.t stays at the need: the best is then the first largest.)
          if (s.v >= s.t && (bounded_ || !have_best || s.v > s.best)) {
            s.best = s.v;
            have_best = true;
            entry.config = static_cast<int>(c);
            entry.fill = ordinal;
            // Later branches must beat it: at least the best plus one in the last entry.
            if (bounded_) {
              s.t = s.best;
              ++s.t.back();
              max_into(s.t, need);
            }
          } else {
            max_into(s.ub_acc, s.v);
          }
        }
        for (const auto& [cls, amount] : f.units) s.r2[cls] += amount;
      });
    }
    // Skip: the remaining GPUs of this class stay as they are (as good as the best fill suffices).
    s.n2[static_cast<size_t>(g)] = 0;
    std::fill(s.w.begin(), s.w.end(), 0);
    if (gc.pinned) {
      const std::vector<int> empty(m_.targets[gc.target].table->profiles.size(), 0);
      s.w.back() -= static_cast<long long>(stranded_of(g, empty)) * n[static_cast<size_t>(g)];
    }
    if (have_best && bounded_) {
      s.t = s.best;
      max_into(s.t, need);
    }
    for (size_t i = 0; i < s.t.size(); ++i) s.child[i] = s.t[i] - s.w[i];
    const Value& rest = solve(r, s.n2, s.child);
    for (size_t i = 0; i < s.v.size(); ++i) s.v[i] = s.w[i] + rest[i];
    if (s.v >= s.t && (bounded_ || !have_best || s.v >= s.best)) {
      s.best = s.v;
      have_best = true;
      entry.config = -1;
      entry.fill = -1;
    } else {
      max_into(s.ub_acc, s.v);
    }
    entry.gpu_class = g;
    entry.exact = have_best;
    entry.value = have_best ? s.best : s.ub_acc;
    return store(k, std::move(entry)).value;
  }

  void rebuild(std::vector<int> r, std::vector<int> n, std::vector<Bin>* bins) {
    for (;;) {
      auto it = memo_.find(key(r, n));
      if (it == memo_.end() || it->second.gpu_class < 0 || !it->second.exact) return;
      const Entry& e = it->second;
      const int g = e.gpu_class;
      if (e.config < 0) {
        n[g] = 0;
        continue;
      }
      // The chosen fill: the same walk as solve()'s at this state, stopped at its ordinal.
      Fill fill;
      long long ordinal = -1;
      for_each_fill(*options_[g][static_cast<size_t>(e.config)], r, takers_of(g, r), [&](const Fill& f) {
        if (++ordinal == e.fill) fill = f;
      });
      Bin b;
      b.gpu_class = g;
      b.capacity = fill.counts;
      b.units.assign(b.capacity.size(), {});
      for (size_t i = 0; i < fill.units.size(); ++i) {
        b.units[fill.profile_of[i]].push_back(fill.units[i]);
        r[fill.units[i].first] -= fill.units[i].second;
      }
      bins->push_back(std::move(b));
      --n[g];
    }
  }

  const PackModel& m_;
  int limit_;
  mutable std::deque<Fill> fills_;                   // for_each_fill's fills per depth (a deque: references stay valid)
  mutable size_t walk_depth_ = 0;                    // walks now in progress
  mutable std::vector<int> busy_units_;              // kept_and_stranded's busy units per profile
  std::deque<Scratch> scratch_;                      // solve()'s working values per depth of its recursion
  size_t solve_depth_ = 0;                           // solve() calls now in progress that opened a GPU
  std::vector<std::vector<const Config*>> options_;  // per class: the configurations a GPU may take
  std::vector<std::vector<int>> demand_profile_;     // per class, per demand class: its profile there or -1
  mutable std::vector<std::unordered_map<uint64_t, int>>
      stranded_by_counts_;                          // per class: gc.all's stranded by pack_counts
  mutable std::vector<char> stranded_ready_;        // per class: stranded_by_counts_ built
  Value zero_;                                      // the value of placing nothing
  std::vector<int> same_options_;                   // per demand class: its group of interchangeable classes, or -1
  bool has_groups_ = false;                         // some group has two classes
  bool bounded_ = true;                             // solve() cuts branches by their bounds (false: searches every one)
  std::vector<std::vector<SliceSums>> slice_cost_;  // per target, per profile: its shares of one GPU
  long long slice_denominator_ = 1;                 // the shares' common denominator (one whole GPU)
  bool aborted_ = false;
  long long work_ = 0;
  KeyPacker packer_;
  std::unordered_map<StateKey, Entry, StateKeyHash> memo_;
};

// ---------------------------------------------------------------------------------------------
// The configuration LP.

enum class Goal { kMinGpus, kPureMinGpus, kMaxTier, kDive };

struct LpRun {
  bool feasible = false;
  double objective = 0;
  std::vector<std::pair<int, int>> xcols;  // (class, config)
  std::vector<double> x;
  std::vector<std::vector<double>> y;  // per demand class, per option
};

LpRun run_lp(const PackModel& M, const std::vector<int>& r, const std::vector<int>& n, Goal goal, int tier,
             const std::vector<double>& tier_floor) {
  LpRun out;
  lp::Problem p;
  std::map<std::pair<int, int>, int> brow;  // (target, profile) -> row
  // x columns.
  for (size_t g = 0; g < M.classes.size(); ++g) {
    if (n[g] <= 0) continue;
    for (size_t c = 0; c < M.classes[g].configs.size(); ++c)
      out.xcols.emplace_back(static_cast<int>(g), static_cast<int>(c));
  }
  const int nx = static_cast<int>(out.xcols.size());
  std::vector<std::vector<int>> ycol(M.demands.size());
  int col = nx;
  for (size_t k = 0; k < M.demands.size(); ++k) {
    ycol[k].assign(M.demands[k].options.size(), -1);
    if (r[k] <= 0) continue;
    for (size_t o = 0; o < M.demands[k].options.size(); ++o) ycol[k][o] = col++;
  }
  p.columns = col;
  p.cost.assign(col, 0.0);
  // A dive's weight per tier: above twice the units a tier can hold, so one unit of a higher tier
  // outweighs every unit of the lower ones and the GPU costs.
  const double big = kTierWeightFactor * (total(n) + 1);
  for (int i = 0; i < nx; ++i) {
    const auto [g, c] = out.xcols[i];
    const double gpu = M.classes[g].pinned ? 0.0 : 1.0;
    const double strand = kStrandedCostPerSlice * M.classes[g].configs[c].stranded;
    p.cost[i] = goal == Goal::kMaxTier ? 0.0 : goal == Goal::kPureMinGpus ? gpu : gpu + strand;
  }
  for (size_t k = 0; k < M.demands.size(); ++k) {
    for (int yc : ycol[k]) {
      if (yc < 0) continue;
      if (goal == Goal::kMaxTier) p.cost[yc] = M.demands[k].tier == tier ? -1.0 : 0.0;
      if (goal == Goal::kDive) p.cost[yc] = -big * (M.tiers - M.demands[k].tier);
    }
  }
  // A_g rows.
  std::map<int, int> arow;
  for (int i = 0; i < nx; ++i) {
    const int g = out.xcols[i].first;
    if (!arow.count(g)) {
      arow[g] = static_cast<int>(p.rows.size());
      p.rows.push_back(lp::Row{{}, lp::Sense::kLe, static_cast<double>(n[g])});
    }
    p.rows[arow[g]].terms.emplace_back(i, 1.0);
  }
  // B rows.
  auto b_row = [&](int t, int prof) {
    auto it = brow.find({t, prof});
    if (it != brow.end()) return it->second;
    const int row = static_cast<int>(p.rows.size());
    p.rows.push_back(lp::Row{{}, lp::Sense::kLe, 0.0});
    brow[{t, prof}] = row;
    return row;
  };
  for (size_t k = 0; k < M.demands.size(); ++k) {
    for (size_t o = 0; o < ycol[k].size(); ++o) {
      if (ycol[k][o] < 0) continue;
      p.rows[b_row(M.demands[k].options[o].target, M.demands[k].options[o].profile)].terms.emplace_back(ycol[k][o],
                                                                                                        1.0);
    }
  }
  for (int i = 0; i < nx; ++i) {
    const auto [g, c] = out.xcols[i];
    const auto& counts = M.classes[g].configs[c].counts;
    for (size_t prof = 0; prof < counts.size(); ++prof) {
      if (counts[prof] == 0) continue;
      auto it = brow.find({M.classes[g].target, static_cast<int>(prof)});
      if (it != brow.end()) p.rows[it->second].terms.emplace_back(i, -static_cast<double>(counts[prof]));
    }
  }
  // C rows.
  const bool exact_demand = goal == Goal::kMinGpus || goal == Goal::kPureMinGpus;
  for (size_t k = 0; k < M.demands.size(); ++k) {
    if (r[k] <= 0) continue;
    lp::Row row{{}, exact_demand ? lp::Sense::kEq : lp::Sense::kLe, static_cast<double>(r[k])};
    for (int yc : ycol[k]) row.terms.emplace_back(yc, 1.0);
    p.rows.push_back(std::move(row));
  }
  if (goal == Goal::kMaxTier) {
    for (int t = 0; t < tier; ++t) {
      lp::Row row{{}, lp::Sense::kGe, std::max(0.0, tier_floor[t] - kFloorSlack)};
      for (size_t k = 0; k < M.demands.size(); ++k) {
        if (M.demands[k].tier != t) continue;
        for (int yc : ycol[k]) {
          if (yc >= 0) row.terms.emplace_back(yc, 1.0);
        }
      }
      if (!row.terms.empty()) p.rows.push_back(std::move(row));
    }
  }
  const lp::Solution s = lp::solve(p);
  out.feasible = s.feasible;
  if (!s.feasible) return out;
  out.objective = s.objective;
  out.x.assign(s.x.begin(), s.x.begin() + nx);
  out.y.resize(M.demands.size());
  for (size_t k = 0; k < M.demands.size(); ++k) {
    out.y[k].assign(ycol[k].size(), 0.0);
    for (size_t o = 0; o < ycol[k].size(); ++o) {
      if (ycol[k][o] >= 0) out.y[k][o] = s.x[ycol[k][o]];
    }
  }
  return out;
}

// Demand classes in priority order (most important tier first), for greedy fills.
std::vector<int> tier_order(const PackModel& M) {
  std::vector<int> order(M.demands.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return M.demands[a].tier < M.demands[b].tier; });
  return order;
}

// Fills `fresh` bins from the remaining demand, following the LP's y where it can, then greedily.
void fill_bins(const PackModel& M, const LpRun& lp, std::vector<Bin>& bins, const std::vector<size_t>& fresh,
               std::vector<int>& r) {
  std::map<std::pair<int, int>, int> pool;  // (target, profile) -> free slots in fresh bins
  for (size_t b : fresh) {
    const int t = M.classes[bins[b].gpu_class].target;
    for (size_t p = 0; p < bins[b].capacity.size(); ++p) pool[{t, static_cast<int>(p)}] += bins[b].capacity[p];
  }
  std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> take;  // pool -> (class, amount)
  const std::vector<int> order = tier_order(M);
  for (int pass = 0; pass < 2; ++pass) {
    for (int k : order) {
      const auto& d = M.demands[k];
      for (size_t o = 0; o < d.options.size() && r[k] > 0; ++o) {
        const std::pair<int, int> key{d.options[o].target, d.options[o].profile};
        auto it = pool.find(key);
        if (it == pool.end() || it->second == 0) continue;
        int want = r[k];
        if (pass == 0) {
          const double y = k < static_cast<int>(lp.y.size()) && o < lp.y[k].size() ? lp.y[k][o] : 0.0;
          want = std::min(want, static_cast<int>(std::floor(y + kFloorSlack)));
        }
        const int a = std::min(want, it->second);
        if (a <= 0) continue;
        it->second -= a;
        r[k] -= a;
        take[key].push_back({k, a});
      }
    }
  }
  for (auto& [key, list] : take) {
    for (size_t b : fresh) {
      if (M.classes[bins[b].gpu_class].target != key.first) continue;
      int room = bins[b].capacity[key.second] - bins[b].filled(key.second);
      while (room > 0 && !list.empty()) {
        const int a = std::min(room, list.back().second);
        bins[b].units[key.second].push_back({list.back().first, a});
        room -= a;
        list.back().second -= a;
        if (list.back().second == 0) list.pop_back();
      }
    }
  }
}

Bin new_bin(const PackModel& M, int g, int c) {
  Bin b;
  b.gpu_class = g;
  b.capacity = M.classes[g].configs[c].counts;
  b.units.assign(b.capacity.size(), {});
  return b;
}

// Turns LP values into whole GPUs: floor of every x (or, when `one`, a single GPU of the largest x),
// fills them, and drops bins that got nothing. Returns the number of units placed.
int commit(const PackModel& M, const LpRun& lp, bool one, std::vector<int>& r, std::vector<int>& n,
           std::vector<Bin>& bins) {
  std::vector<size_t> fresh;
  const size_t before = bins.size();
  if (one) {
    size_t best = 0;
    for (size_t i = 1; i < lp.x.size(); ++i) {
      if (lp.x[i] > lp.x[best]) best = i;
    }
    if (lp.x.empty() || lp.x[best] <= kFloorSlack) return 0;
    const auto [g, c] = lp.xcols[best];
    bins.push_back(new_bin(M, g, c));
    --n[g];
  } else {
    for (size_t i = 0; i < lp.x.size(); ++i) {
      const auto [g, c] = lp.xcols[i];
      const int k = std::min(static_cast<int>(std::floor(lp.x[i] + kFloorSlack)), n[g]);
      for (int j = 0; j < k; ++j) bins.push_back(new_bin(M, g, c));
      n[g] -= std::max(k, 0);
    }
  }
  for (size_t b = before; b < bins.size(); ++b) fresh.push_back(b);
  const int r0 = total(r);
  fill_bins(M, lp, bins, fresh, r);
  // Drop empty bins (unless pinned: those GPUs are used anyway) and give their GPUs back.
  std::vector<Bin> kept(bins.begin(), bins.begin() + static_cast<long>(before));
  for (size_t b = before; b < bins.size(); ++b) {
    if (bins[b].total() > 0 || M.classes[bins[b].gpu_class].pinned)
      kept.push_back(std::move(bins[b]));
    else
      ++n[bins[b].gpu_class];
  }
  bins = std::move(kept);
  return r0 - total(r);
}

// Memory plus compute slices of the units a fresh GPU of (g, c) would take from `r`, and how many
// such GPUs in a row the demand could fill the same way.
struct FillWeight {
  int weight = 0;
  int repeat = 0;
};
FillWeight fill_weight(const PackModel& M, int g, int c, const std::vector<int>& r) {
  const GpuClass& gc = M.classes[g];
  const MigTable& t = *M.targets[gc.target].table;
  const std::vector<int>& counts = gc.configs[c].counts;
  FillWeight out;
  out.repeat = std::numeric_limits<int>::max();
  for (size_t p = 0; p < counts.size(); ++p) {
    if (counts[p] == 0) continue;
    int avail = 0;
    for (size_t k = 0; k < M.demands.size(); ++k) {
      if (r[k] > 0 && option_for(M.demands[k], gc.target) == static_cast<int>(p)) avail += r[k];
    }
    const int take = std::min(avail, counts[p]);
    out.weight += take * (t.profiles[p].memory_slices + t.profiles[p].compute_slices);
    if (take > 0) out.repeat = std::min(out.repeat, avail / counts[p]);
  }
  if (out.repeat == std::numeric_limits<int>::max()) out.repeat = 0;
  return out;
}

// Candidates for the next single GPU: the configurations with the largest LP values, and the ones
// that would take the most of the remaining demand (the LP may spread over configurations that only
// together hold what one configuration outside its support holds).
std::vector<std::pair<int, int>> dive_candidates(const PackModel& M, const LpRun& lp, const std::vector<int>& r,
                                                 const std::vector<int>& n) {
  std::vector<size_t> order;
  for (size_t i = 0; i < lp.x.size(); ++i) {
    if (lp.x[i] > kFloorSlack) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return lp.x[a] > lp.x[b]; });
  if (order.size() > kDiveCandidates) order.resize(kDiveCandidates);
  std::vector<std::pair<int, int>> out;
  out.reserve(order.size());
  for (size_t i : order) out.push_back(lp.xcols[i]);
  std::vector<std::pair<int, std::pair<int, int>>> by_weight;
  for (size_t g = 0; g < M.classes.size(); ++g) {
    if (n[g] <= 0) continue;
    for (size_t c = 0; c < M.classes[g].configs.size(); ++c) {
      const std::pair<int, int> gc{static_cast<int>(g), static_cast<int>(c)};
      by_weight.emplace_back(fill_weight(M, gc.first, gc.second, r).weight, gc);
    }
  }
  std::stable_sort(by_weight.begin(), by_weight.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; i < by_weight.size() && i < kDiveCandidates; ++i) {
    if (std::find(out.begin(), out.end(), by_weight[i].second) == out.end()) out.push_back(by_weight[i].second);
  }
  return out;
}

// Units placed, weighted by priority level (more important levels weigh more), and GPUs used, of
// bins and of an LP solution.
struct Score {
  double placed = 0;
  double gpus = 0;
  bool better_than(const Score& o) const {
    if (placed > o.placed + kFloorSlack) return true;
    if (placed < o.placed - kFloorSlack) return false;
    return gpus < o.gpus - kFloorSlack;
  }
};

double level_weight(const PackModel& M, int k) { return M.tiers - M.demands[k].tier; }

// One GPU of one candidate configuration: the one after which the most units can still be placed
// (by the LP), then the fewest GPUs are needed. Falls back to the largest LP value.
bool commit_keeping_feasible(const PackModel& M, const LpRun& lp, std::vector<int>& r, std::vector<int>& n,
                             std::vector<Bin>& bins) {
  Score best;
  best.placed = -1;
  std::vector<int> best_r, best_n;
  std::vector<Bin> best_bins;
  for (const auto& [g, c] : dive_candidates(M, lp, r, n)) {
    if (cancel_requested()) return false;
    LpRun one;
    one.xcols = {{g, c}};
    one.x = {1.0};
    std::vector<int> r2 = r, n2 = n;
    std::vector<Bin> b2 = bins;
    if (commit(M, one, true, r2, n2, b2) == 0) continue;
    Score s;
    s.gpus = M.classes[g].pinned ? 0.0 : 1.0;
    for (size_t k = 0; k < r.size(); ++k) s.placed += (r[k] - r2[k]) * level_weight(M, static_cast<int>(k));
    if (total(r2) > 0) {
      const LpRun rest = run_lp(M, r2, n2, Goal::kDive, 0, {});
      if (!rest.feasible) continue;
      for (size_t i = 0; i < rest.x.size(); ++i) s.gpus += M.classes[rest.xcols[i].first].pinned ? 0.0 : rest.x[i];
      for (size_t k = 0; k < rest.y.size(); ++k) {
        for (double y : rest.y[k]) s.placed += y * level_weight(M, static_cast<int>(k));
      }
    }
    if (s.better_than(best)) {
      best = s;
      best_r = std::move(r2);
      best_n = std::move(n2);
      best_bins = std::move(b2);
    }
  }
  if (best.placed >= 0) {
    r = std::move(best_r);
    n = std::move(best_n);
    bins = std::move(best_bins);
    return true;
  }
  return commit(M, lp, true, r, n, bins) > 0;
}

// Whether the exact search should try (r, n): few units and few classes of GPUs left, and a cost model
// that says it finishes: its states (exact_state_bound) within the state limit and the fills it would
// evaluate (Exact::work_bound) within kExactWorkLimit. A search that cannot finish is not started.
// GPUs beyond the number of units are useless, so `n` is capped at it.
bool exact_worth_trying(const PackModel& M, const std::vector<int>& r, std::vector<int>& n, int limit) {
  const int units = total(r);
  if (units > kExactMaxUnits) return false;
  int classes = 0;
  for (int& v : n) {
    v = std::min(v, units);
    classes += v > 0 ? 1 : 0;
  }
  if (classes > kExactMaxClasses) return false;
  const double states = exact_state_bound(M, r, n);
  const double work = states <= static_cast<double>(limit)
                          ? Exact(M, limit).work_bound(r, n, static_cast<double>(kExactWorkLimit))
                          : std::numeric_limits<double>::infinity();
  const bool within = states <= static_cast<double>(limit) && work <= static_cast<double>(kExactWorkLimit);
  if (M.stats) {
    if (within) {
      M.stats->largest_run_bound = std::max(M.stats->largest_run_bound, states);
    } else {
      ++M.stats->exact_skipped;
      M.stats->largest_skipped_bound = std::max(M.stats->largest_skipped_bound, states);
    }
  }
  return within;
}

// Fills every pinned GPU (used anyway) with the configuration that takes the most of the demand,
// then takes the pinned classes out of `n`.
void prefill_pinned(const PackModel& M, std::vector<int>& r, std::vector<int>& n, std::vector<Bin>& bins) {
  for (size_t g = 0; g < M.classes.size(); ++g) {
    if (!M.classes[g].pinned) continue;
    while (n[g] > 0 && total(r) > 0) {
      int best = -1;
      FillWeight best_w;
      for (size_t c = 0; c < M.classes[g].configs.size(); ++c) {
        const FillWeight w = fill_weight(M, static_cast<int>(g), static_cast<int>(c), r);
        if (w.weight > best_w.weight) {
          best_w = w;
          best = static_cast<int>(c);
        }
      }
      if (best < 0) break;
      // The same fill repeats while every profile it takes has enough demand left.
      LpRun same;
      same.xcols = {{static_cast<int>(g), best}};
      same.x = {static_cast<double>(std::max(1, std::min(best_w.repeat, n[g])))};
      if (commit(M, same, false, r, n, bins) == 0) break;
    }
    n[g] = 0;
  }
}

}  // namespace

double exact_state_bound(const PackModel& M, const std::vector<int>& r, const std::vector<int>& n,
                         std::vector<double>* per_class) {
  if (per_class) per_class->assign(M.classes.size(), 0.0);
  // The search opens GPUs of the first class with GPUs left, so a state whose first such class is g
  // has every later class untouched and only changed the demand of classes with an option on the
  // targets of classes up to g; and it took at most as many units as the GPUs it opened hold. So the
  // states are at most the sum over g and j = GPUs of g left (1..n_g) of the demand vectors d <= r
  // over those classes with sum(r - d) <= the units of the GPUs opened before, plus the states with
  // no GPUs left (every class opened).
  const int units = total(r);
  std::vector<bool> counted(M.demands.size(), false);
  std::vector<double> ways{1.0};  // ways[u]: demand taken summing to u units
  ways.resize(static_cast<size_t>(std::max(0, units)) + 1, 0.0);
  std::vector<double> at_most(ways.size(), 0.0);  // at_most[u]: taken summing to at most u
  double states = 0;
  long long opened_capacity = 0;  // units the GPUs of earlier classes hold
  for (size_t g = 0; g < M.classes.size() && g < n.size(); ++g) {
    if (n[g] <= 0) continue;
    const GpuClass& gc = M.classes[g];
    for (size_t k = 0; k < M.demands.size() && k < r.size(); ++k) {
      if (counted[k] || r[k] <= 0 || option_for(M.demands[k], gc.target) < 0) continue;
      counted[k] = true;
      // Convolve with 0..r[k] units taken of class k (a running window sum).
      std::vector<double> next(ways.size(), 0.0);
      double window = 0;
      for (size_t u = 0; u < ways.size(); ++u) {
        window += ways[u];
        if (u >= static_cast<size_t>(r[k]) + 1) window -= ways[u - static_cast<size_t>(r[k]) - 1];
        next[u] = window;
      }
      ways = std::move(next);
    }
    double sum = 0;
    for (size_t u = 0; u < ways.size(); ++u) at_most[u] = sum += ways[u];
    int per_gpu = 0;  // the most instances one GPU of the class takes
    for (const auto& c : gc.configs) per_gpu = std::max(per_gpu, total(c.counts));
    double of_class = 0;
    for (int j = n[g]; j >= 1; --j) {
      const long long cap = opened_capacity + static_cast<long long>(n[g] - j) * per_gpu;
      of_class += at_most[static_cast<size_t>(std::min<long long>(cap, units))];
    }
    states += of_class;
    if (per_class) (*per_class)[g] = of_class;
    opened_capacity += static_cast<long long>(n[g]) * per_gpu;
  }
  double none_left = 0;
  for (size_t u = 0; u < ways.size() && static_cast<long long>(u) <= opened_capacity; ++u) none_left += ways[u];
  return states + none_left;
}

double lp_lower_bound(const PackModel& M, const std::vector<int>& placed) {
  std::vector<int> n;
  for (const auto& c : M.classes) n.push_back(static_cast<int>(c.members.size()));
  if (total(placed) == 0) return 0.0;
  const LpRun run = run_lp(M, placed, n, Goal::kPureMinGpus, 0, {});
  return run.feasible ? run.objective : 0.0;
}

SolveOutcome solve_packing_for(const PackModel& M, const std::vector<int>& demand, const std::vector<int>& gpus,
                               int exact_state_limit) {
  SolveOutcome out;
  std::vector<int> r = demand, n = gpus;
  auto finish = [&](const std::vector<int>& left) {
    out.unplaced = left;
    return out;
  };
  std::vector<int> capped = n;
  if (exact_worth_trying(M, r, capped, exact_state_limit)) {
    Exact exact(M, exact_state_limit);
    std::vector<Bin> bins;
    if (exact.run(r, capped, &bins)) {
      out.bins = std::move(bins);
      out.exact = true;
      std::vector<int> left = r;
      for (const auto& b : out.bins) {
        for (const auto& per : b.units) {
          for (const auto& [k, a] : per) left[k] -= a;
        }
      }
      return finish(left);
    }
  }
  int pinned_classes = 0;
  for (const auto& c : M.classes) pinned_classes += c.pinned ? 1 : 0;
  if (pinned_classes > kMaxLpPinnedClasses) prefill_pinned(M, r, n, out.bins);
  LpRun all = run_lp(M, r, n, Goal::kMinGpus, 0, {});
  if (!all.feasible) {
    // Not everything fits: the most units of each tier, most important first.
    std::vector<double> floors(M.tiers, 0.0);
    LpRun last;
    for (int t = 0; t < M.tiers; ++t) {
      if (cancel_requested()) return finish(r);
      last = run_lp(M, r, n, Goal::kMaxTier, t, floors);
      if (!last.feasible) break;
      for (size_t k = 0; k < M.demands.size(); ++k) {
        if (M.demands[k].tier != t) continue;
        for (double y : last.y[k]) floors[t] += y;
      }
    }
    if (last.feasible) {
      for (size_t k = 0; k < M.demands.size(); ++k) {
        double placed = 0;
        for (double y : last.y[k]) placed += y;
        r[k] = std::min(r[k], static_cast<int>(std::floor(placed + kFloorSlack)));
      }
    }
    all = run_lp(M, r, n, Goal::kMinGpus, 0, {});
  }
  if (all.feasible) commit(M, all, false, r, n, out.bins);
  // The residual: restore the units the tier LPs trimmed, they may still fit.
  for (size_t k = 0; k < r.size(); ++k) {
    int placed = 0;
    for (const auto& b : out.bins) {
      for (const auto& per : b.units) {
        for (const auto& [cls, a] : per) placed += cls == static_cast<int>(k) ? a : 0;
      }
    }
    r[k] = demand[k] - placed;
  }
  while (total(r) > 0) {
    if (cancel_requested()) break;
    std::vector<int> rest = n;
    if (exact_worth_trying(M, r, rest, exact_state_limit)) {
      Exact exact(M, exact_state_limit);
      std::vector<Bin> more;
      if (exact.run(r, rest, &more)) {
        for (auto& b : more) {
          for (const auto& per : b.units) {
            for (const auto& [k, a] : per) r[k] -= a;
          }
          --n[b.gpu_class];
          out.bins.push_back(std::move(b));
        }
        break;
      }
    }
    const LpRun dive = run_lp(M, r, n, Goal::kDive, 0, {});
    if (!dive.feasible) break;
    bool any_whole = false;
    for (double x : dive.x) any_whole = any_whole || x >= 1.0 - kFloorSlack;
    if (any_whole) {
      if (commit(M, dive, false, r, n, out.bins) > 0) continue;
    }
    if (!commit_keeping_feasible(M, dive, r, n, out.bins)) break;
  }
  return finish(r);
}

namespace {

// The exact search with every set of GPUs that hold the same busy instances as its own class (those
// first: GPUs without busy instances only take what is left, so their fills may stay maximal), so that
// it also maximizes the busy instances kept in place. False when it is not worth trying or gave up.
bool solve_exact_keeping(const PackModel& M, int exact_state_limit, SolveOutcome* out) {
  PackModel split;
  split.targets = M.targets;
  split.demands = M.demands;
  split.tiers = M.tiers;
  split.busy_on_gpu = M.busy_on_gpu;
  split.stats = M.stats;
  std::vector<int> parent;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t g = 0; g < M.classes.size(); ++g) {
      std::map<std::vector<std::pair<int, int>>, std::vector<size_t>> groups;
      for (size_t gi : M.classes[g].members) {
        std::vector<std::pair<int, int>> key;
        for (const auto& b : M.busy_on_gpu[gi]) key.emplace_back(b.profile, b.start);
        if (key.empty() == (pass == 0)) continue;
        groups[key].push_back(gi);
      }
      for (auto& [key, members] : groups) {
        GpuClass c = M.classes[g];
        c.members = std::move(members);
        c.busy = M.busy_on_gpu[c.members.front()];
        split.classes.push_back(std::move(c));
        parent.push_back(static_cast<int>(g));
      }
    }
  }
  std::vector<int> r, n;
  for (const auto& d : split.demands) r.push_back(d.count);
  for (const auto& c : split.classes) n.push_back(static_cast<int>(c.members.size()));
  if (!exact_worth_trying(split, r, n, exact_state_limit)) return false;
  Exact exact(split, exact_state_limit);
  std::vector<Bin> bins;
  if (!exact.run(r, n, &bins)) return false;
  std::vector<size_t> next(split.classes.size(), 0);
  for (auto& b : bins) {
    const int sub = b.gpu_class;
    b.gpu = static_cast<int>(split.classes[sub].members[next[sub]++]);
    b.gpu_class = parent[sub];
    for (const auto& per : b.units) {
      for (const auto& [k, a] : per) r[k] -= a;
    }
  }
  out->bins = std::move(bins);
  out->unplaced = std::move(r);
  out->exact = true;
  return true;
}

}  // namespace

KeepEval best_keeping_layout(const TableModel& tm, const std::vector<Placed>& busy, const std::vector<int>& counts,
                             const std::vector<int>& busy_units) {
  KeepEval best;
  auto it = tm.by_counts.find(counts);
  if (it == tm.by_counts.end()) return best;
  for (int li : it->second) {
    // Per profile of the busy instances (each counted at its first one): those the layout holds at
    // their starts, at most the busy units of that profile (no allocation: a GPU holds at most 7).
    int kept = 0;
    for (size_t i = 0; i < busy.size(); ++i) {
      const int p = busy[i].profile;
      bool first = true;
      for (size_t j = 0; j < i && first; ++j) first = busy[j].profile != p;
      if (!first || p < 0 || static_cast<size_t>(p) >= busy_units.size()) continue;
      int hits = 0;
      for (size_t j = i; j < busy.size(); ++j) {
        if (busy[j].profile == p && (tm.bits[li] & tm.bit(busy[j]))) ++hits;
      }
      kept += std::min(hits, busy_units[static_cast<size_t>(p)]);
    }
    const int stranded = tm.stranded_total(li);
    if (best.layout < 0 || kept > best.kept || (kept == best.kept && stranded < best.stranded)) {
      best = KeepEval{li, kept, stranded};
    }
  }
  return best;
}

SolveOutcome solve_packing(const PackModel& M, int exact_state_limit) {
  const bool busy = std::any_of(M.busy_on_gpu.begin(), M.busy_on_gpu.end(), [](const auto& b) { return !b.empty(); });
  if (busy) {
    SolveOutcome exact;
    if (solve_exact_keeping(M, exact_state_limit, &exact)) return exact;
  }
  std::vector<int> r, n;
  for (const auto& d : M.demands) r.push_back(d.count);
  for (const auto& c : M.classes) n.push_back(static_cast<int>(c.members.size()));
  SolveOutcome out = solve_packing_for(M, r, n, exact_state_limit);
  if (busy) reduce_disturbance(M, out.bins, exact_state_limit);
  return out;
}

}  // namespace gpuplan::mig

#include "mig/table_model.h"

#include <algorithm>
#include <bit>
#include <mutex>
#include <string>
#include <unordered_map>

namespace gpuplan::mig {

uint64_t TableModel::bits_of(const std::vector<Placed>& layout) const {
  uint64_t b = 0;
  for (const auto& p : layout) b |= bit(p);
  return b;
}

namespace {

std::shared_ptr<const TableModel> build(const MigTable& table) {
  if (static_cast<int>(table.profiles.size()) * table.memory_slices > kMaxPlacementBits) return nullptr;
  auto m = std::make_shared<TableModel>();
  m->own = table;
  m->layouts = all_layouts(m->own);
  const size_t n = m->layouts.size();
  m->bits.resize(n);
  m->counts.resize(n);
  m->stranded.resize(n);
  std::vector<int> mem(n, 0), compute(n, 0);
  for (size_t i = 0; i < n; ++i) {
    m->bits[i] = m->bits_of(m->layouts[i]);
    m->counts[i] = profile_counts(table, m->layouts[i]);
    for (const auto& p : m->layouts[i]) {
      mem[i] += table.profiles[p.profile].memory_slices;
      compute[i] += table.profiles[p.profile].compute_slices;
    }
    m->by_counts[m->counts[i]].push_back(static_cast<int>(i));
  }
  // Stranded = free capacity minus what the best superset layout could still add. A layout with no
  // strict superset is maximal. Valid layouts are closed under removing an instance, so every superset
  // of a layout is reached from it by adding one instance at a time through valid layouts: the best
  // superset's capacity is a maximum over one-instance extensions, taken from the largest layouts down
  // (n layouts x at most 64 placements, instead of comparing every pair: 133 M instructions for the
  // three tables of examples/mig before, issue #19).
  std::unordered_map<uint64_t, size_t> index_of;
  index_of.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) index_of.emplace(m->bits[i], i);
  std::vector<size_t> order(n);
  std::vector<int> instances(n);
  for (size_t i = 0; i < n; ++i) {
    order[i] = i;
    instances[i] = std::popcount(m->bits[i]);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return instances[a] > instances[b]; });
  std::vector<int> best_mem = mem, best_compute = compute;
  std::vector<bool> is_maximal(n, true);
  const int placement_bits = static_cast<int>(table.profiles.size()) * table.memory_slices;
  for (size_t i : order) {
    for (int b = 0; b < placement_bits; ++b) {
      const uint64_t bit = uint64_t{1} << b;
      if (m->bits[i] & bit) continue;
      auto it = index_of.find(m->bits[i] | bit);
      if (it == index_of.end()) continue;
      is_maximal[i] = false;
      best_mem[i] = std::max(best_mem[i], best_mem[it->second]);
      best_compute[i] = std::max(best_compute[i], best_compute[it->second]);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    m->stranded[i] = Stranded{table.memory_slices - best_mem[i], table.compute_slices - best_compute[i]};
    if (is_maximal[i]) m->maximal.push_back(static_cast<int>(i));
  }
  return m;
}

// Everything the rules read from a table, so that equal tables share one model.
std::string table_key(const MigTable& t) {
  std::string k = t.id + "|" + std::to_string(t.memory_slices) + "|" + std::to_string(t.compute_slices) + "|" +
                  std::to_string(t.max_instances);
  for (const auto& p : t.profiles) {
    k += "|" + p.name + ":" + std::to_string(p.memory_slices) + ":" + std::to_string(p.compute_slices) + ":" +
         std::to_string(p.max_count) + ":" + (p.media_extensions ? "me" : "") + ":";
    for (int s : p.placement_starts) k += std::to_string(s) + ",";
  }
  return k;
}

}  // namespace

std::shared_ptr<const TableModel> table_model(const MigTable& table) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const TableModel>> cache;
  const std::string key = table_key(table);
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  auto m = build(table);
  cache[key] = m;
  return m;
}

}  // namespace gpuplan::mig

#include "mig/table_model.h"

#include <mutex>
#include <string>

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
  // strict superset is maximal (valid layouts are closed under removing an instance).
  for (size_t i = 0; i < n; ++i) {
    int best_mem = mem[i], best_compute = compute[i];
    bool maximal = true;
    for (size_t j = 0; j < n; ++j) {
      if ((m->bits[j] & m->bits[i]) != m->bits[i]) continue;
      if (m->bits[j] != m->bits[i]) maximal = false;
      best_mem = std::max(best_mem, mem[j]);
      best_compute = std::max(best_compute, compute[j]);
    }
    m->stranded[i] = Stranded{table.memory_slices - best_mem, table.compute_slices - best_compute};
    if (maximal) m->maximal.push_back(static_cast<int>(i));
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

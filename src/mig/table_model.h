// Precomputed facts about one MIG table for the packer: every valid layout, as a bit set of
// placements, with its profile counts and stranded capacity, and lookups by counts.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "gpuplan/mig.h"

namespace gpuplan::mig {

// Placement bit ids are profile * memory_slices + start; they must fit a 64-bit set.
constexpr int kMaxPlacementBits = 64;

struct TableModel {
  MigTable own;  // a copy: the model outlives any one catalog
  const MigTable* table = &own;
  std::vector<std::vector<Placed>> layouts;
  std::vector<uint64_t> bits;                              // per layout
  std::vector<std::vector<int>> counts;                    // per layout, per profile
  std::vector<Stranded> stranded;                          // per layout
  std::vector<int> maximal;                                // layouts no other layout strictly contains
  std::map<std::vector<int>, std::vector<int>> by_counts;  // counts -> layout indices

  TableModel() = default;
  TableModel(const TableModel&) = delete;
  TableModel& operator=(const TableModel&) = delete;

  uint64_t bit(const Placed& p) const { return uint64_t{1} << (p.profile * table->memory_slices + p.start); }
  uint64_t bits_of(const std::vector<Placed>& layout) const;
  int stranded_total(int layout) const { return stranded[layout].memory_slices + stranded[layout].compute_slices; }
};

// Built once per table and cached for the process (tables are immutable). nullptr when the table is
// too large for the bit sets (never for NVIDIA's tables: at most 7 profiles x 8 slices).
std::shared_ptr<const TableModel> table_model(const MigTable& table);

}  // namespace gpuplan::mig

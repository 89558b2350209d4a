// The MIG placement rules and the layout checker. Sources (short names used in messages):
//   [UG-prof]  https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html
//   [UG-conc]  https://docs.nvidia.com/datacenter/tesla/mig-user-guide/concepts.html
//   [UG-start] https://docs.nvidia.com/datacenter/tesla/mig-user-guide/getting-started-with-mig.html
#include <algorithm>
#include <cctype>
#include <charconv>
#include <functional>
#include <sstream>

#include "gpuplan/mig.h"
#include "mig/table_model.h"

namespace gpuplan::mig {

namespace {

// At most one instance per GPU carries the media extensions: the +me profile takes the GPU's only
// JPEG decoder and OFA, and its max count is 1 ([UG-prof], "+me" rows and notes).
constexpr int kMaxMediaExtensionInstances = 1;
// NVML compute-instance profile ids by compute slices (COMPUTE_INSTANCE_PROFILE_<n>_SLICE, nvml.h;
// the ids `nvidia-smi mig -lcip` prints and `-cci` takes, [UG-start]).
constexpr int kCiProfileIdBySlices[] = {-1, 0, 1, 2, 3, -1, 6, 4, 5};
constexpr int kMaxCiSlices = 8;

std::string join_ints(const std::vector<int>& v, const char* sep = ",") {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : sep) + std::to_string(x);
  return out;
}

std::string slice_range(int start, int size) {
  return size == 1 ? "memory slice " + std::to_string(start)
                   : "memory slices " + std::to_string(start) + "-" + std::to_string(start + size - 1);
}

uint32_t mask_of(int start, int size) { return ((1u << size) - 1u) << start; }

std::string placed_name(const MigTable& t, const Placed& p) {
  return t.profiles[p.profile].name + "@" + std::to_string(p.start);
}

bool valid_start(const MigProfile& p, int start) {
  return std::find(p.placement_starts.begin(), p.placement_starts.end(), start) != p.placement_starts.end();
}

Rule count_rules(const MigTable& t, const std::vector<int>& profiles, std::string* reason) {
  std::vector<int> counts(t.profiles.size(), 0);
  int media = 0, compute = 0;
  for (int p : profiles) {
    ++counts[p];
    media += t.profiles[p].media_extensions ? 1 : 0;
    compute += t.profiles[p].compute_slices;
  }
  for (size_t p = 0; p < counts.size(); ++p) {
    if (counts[p] > t.profiles[p].max_count) {
      *reason = std::to_string(counts[p]) + " x " + t.profiles[p].name + " exceeds the profile's maximum of " +
                std::to_string(t.profiles[p].max_count) + " per GPU ([UG-prof], 'Number of Instances Available')";
      return Rule::kMaxCount;
    }
  }
  if (static_cast<int>(profiles.size()) > t.max_instances) {
    *reason = std::to_string(profiles.size()) + " GPU instances exceed the GPU's maximum of " +
              std::to_string(t.max_instances) + " ([UG-conc]: up to " + std::to_string(t.max_instances) +
              " MIG instances)";
    return Rule::kMaxInstances;
  }
  if (media > kMaxMediaExtensionInstances) {
    *reason = std::to_string(media) +
              " media-extension (+me) instances; a GPU has one set of media engines, so at "
              "most one +me instance fits ([UG-prof], +me profiles)";
    return Rule::kMediaExtensions;
  }
  if (compute > t.compute_slices) {
    *reason = std::to_string(compute) + " compute slices exceed the GPU's " + std::to_string(t.compute_slices) +
              " ([UG-conc]: a GPU in MIG mode has " + std::to_string(t.compute_slices) + " SM slices)";
    return Rule::kComputeSlices;
  }
  return Rule::kNone;
}

Rule placement_rules(const MigTable& t, const std::vector<Placed>& layout, std::string* reason) {
  for (const auto& pl : layout) {
    const MigProfile& p = t.profiles[pl.profile];
    if (!valid_start(p, pl.start)) {
      *reason = placed_name(t, pl) + ": " + p.name + " starts only at memory slice " +
                join_ints(p.placement_starts, ", ") + " ([UG-start], nvidia-smi mig -lgipp: {" +
                join_ints(p.placement_starts) + "}:" + std::to_string(p.memory_slices) + ")";
      return Rule::kPlacementStart;
    }
  }
  for (size_t i = 0; i < layout.size(); ++i) {
    for (size_t j = i + 1; j < layout.size(); ++j) {
      const MigProfile& a = t.profiles[layout[i].profile];
      const MigProfile& b = t.profiles[layout[j].profile];
      if (mask_of(layout[i].start, a.memory_slices) & mask_of(layout[j].start, b.memory_slices)) {
        *reason = placed_name(t, layout[i]) + " (" + slice_range(layout[i].start, a.memory_slices) + ") overlaps " +
                  placed_name(t, layout[j]) + " (" + slice_range(layout[j].start, b.memory_slices) +
                  "); instances may not share memory slices (NVML: creating a GPU instance fails if it overlaps "
                  "occupied memory slices; [UG-conc] partitioning)";
        return Rule::kOverlap;
      }
    }
  }
  return Rule::kNone;
}

// Finds starts for the unplaced profiles around the occupied mask, largest first. Returns false when
// none exists. Tries every combination (a handful of entries on at most 8 slices).
bool place_rest(const MigTable& t, std::vector<Placed>& layout, const std::vector<size_t>& todo, size_t k,
                uint32_t occupied) {
  if (k == todo.size()) return true;
  Placed& pl = layout[todo[k]];
  const MigProfile& p = t.profiles[pl.profile];
  for (int s : p.placement_starts) {
    const uint32_t m = mask_of(s, p.memory_slices);
    if (s + p.memory_slices > t.memory_slices || (m & occupied)) continue;
    pl.start = s;
    if (place_rest(t, layout, todo, k + 1, occupied | m)) return true;
  }
  return false;
}

Result<int> resolve_profile(const MigTable& t, const std::string& name) {
  for (size_t i = 0; i < t.profiles.size(); ++i) {
    if (t.profiles[i].name == name) return static_cast<int>(i);
  }
  std::string list;
  for (const auto& p : t.profiles) list += (list.empty() ? "" : ", ") + p.name;
  return not_found_error("MIG table " + t.id + " has no profile '" + name + "'; its profiles are " + list, "layout");
}

Rule compute_instance_rule(const MigTable& t, const MigProfile& p, const std::vector<int>& cis, std::string* reason) {
  int sum = 0;
  for (int c : cis) {
    bool known = false;
    for (const auto& q : t.profiles) known = known || (q.compute_slices == c && !q.media_extensions);
    if (c < 1 || c > p.compute_slices || !known) {
      *reason = p.name + "[" + join_ints(cis) + "]: a " + std::to_string(c) + "c compute instance does not fit a " +
                std::to_string(p.compute_slices) +
                "-slice GPU instance (compute instances subdivide their GPU "
                "instance's SM slices, [UG-conc])";
      return Rule::kComputeInstance;
    }
    sum += c;
  }
  if (sum > p.compute_slices) {
    *reason = p.name + "[" + join_ints(cis) + "]: " + std::to_string(sum) +
              " compute slices exceed the GPU instance's " + std::to_string(p.compute_slices) +
              " ([UG-conc], compute instances)";
    return Rule::kComputeInstance;
  }
  return Rule::kNone;
}

}  // namespace

std::string_view rule_name(Rule rule) {
  switch (rule) {
    case Rule::kNone:
      return "none";
    case Rule::kPlacementStart:
      return "placement_start";
    case Rule::kOverlap:
      return "overlap";
    case Rule::kMaxCount:
      return "max_count";
    case Rule::kMaxInstances:
      return "max_instances";
    case Rule::kMediaExtensions:
      return "media_extensions";
    case Rule::kComputeSlices:
      return "compute_slices";
    case Rule::kNoPlacement:
      return "no_placement";
    case Rule::kComputeInstance:
      return "compute_instance";
  }
  return "unknown";
}

Result<std::vector<LayoutEntry>> parse_layout(std::string_view text) {
  std::vector<LayoutEntry> out;
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      cur += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  parts.push_back(cur);
  for (const auto& part : parts) {
    if (part.empty()) return usage_error("empty entry in layout '" + std::string(text) + "'", "layout");
    LayoutEntry e;
    std::string head = part;
    if (auto lb = head.find('['); lb != std::string::npos) {
      if (head.back() != ']') return usage_error("'" + part + "': a compute-instance list ends with ']'", "layout");
      std::string inner = head.substr(lb + 1, head.size() - lb - 2);
      head = head.substr(0, lb);
      std::stringstream ss(inner);
      for (std::string ci; std::getline(ss, ci, ',');) {
        int n = 0;
        auto [ptr, ec] = std::from_chars(ci.data(), ci.data() + ci.size(), n);
        if (ec != std::errc() || ptr == ci.data() || std::string_view(ptr) != "c" || n > kMaxCiSlices) {
          return usage_error("'" + part + "': compute instances are written like [1c,2c]", "layout");
        }
        e.compute_slices.push_back(n);
      }
    }
    if (auto at = head.find('@'); at != std::string::npos) {
      const std::string s = head.substr(at + 1);
      int start = 0;
      auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), start);
      if (ec != std::errc() || ptr != s.data() + s.size() || s.empty()) {
        return usage_error("'" + part + "': the start after '@' must be a memory slice number", "layout");
      }
      e.start = start;
      head = head.substr(0, at);
    }
    e.profile = head;
    out.push_back(std::move(e));
  }
  return out;
}

uint32_t occupancy(const MigTable& table, const std::vector<Placed>& layout) {
  uint32_t m = 0;
  for (const auto& p : layout) m |= mask_of(p.start, table.profiles[p.profile].memory_slices);
  return m;
}

Rule first_broken_rule(const MigTable& table, const std::vector<Placed>& layout, std::string* reason) {
  std::string scratch;
  if (!reason) reason = &scratch;
  if (Rule r = placement_rules(table, layout, reason); r != Rule::kNone) return r;
  std::vector<int> profiles;
  profiles.reserve(layout.size());
  for (const auto& p : layout) profiles.push_back(p.profile);
  return count_rules(table, profiles, reason);
}

Result<CheckResult> check_layout(const MigTable& table, const std::vector<LayoutEntry>& entries) {
  CheckResult out;
  std::vector<Placed> layout;
  std::vector<Placed> explicit_only;
  std::vector<size_t> todo;
  std::vector<int> profiles;
  for (size_t i = 0; i < entries.size(); ++i) {
    auto p = resolve_profile(table, entries[i].profile);
    if (!p) return p.error();
    profiles.push_back(*p);
    layout.push_back(Placed{*p, entries[i].start.value_or(-1)});
    if (entries[i].start)
      explicit_only.push_back(layout.back());
    else
      todo.push_back(i);
  }
  auto fail = [&](Rule r, std::string reason) {
    out.valid = false;
    out.rule = r;
    out.reason = std::move(reason);
    return out;
  };
  std::string reason;
  if (Rule r = placement_rules(table, explicit_only, &reason); r != Rule::kNone) return fail(r, reason);
  if (Rule r = count_rules(table, profiles, &reason); r != Rule::kNone) return fail(r, reason);
  for (size_t i = 0; i < entries.size(); ++i) {
    const MigProfile& p = table.profiles[profiles[i]];
    if (Rule r = compute_instance_rule(table, p, entries[i].compute_slices, &reason); r != Rule::kNone) {
      return fail(r, reason);
    }
  }
  // Largest unplaced first: they have the fewest starts.
  std::stable_sort(todo.begin(), todo.end(), [&](size_t a, size_t b) {
    return table.profiles[profiles[a]].memory_slices > table.profiles[profiles[b]].memory_slices;
  });
  if (!place_rest(table, layout, todo, 0, occupancy(table, explicit_only))) {
    std::string names;
    for (size_t i : todo) names += (names.empty() ? "" : ", ") + table.profiles[profiles[i]].name;
    const uint32_t occ = occupancy(table, explicit_only);
    std::vector<int> free_slices;
    for (int s = 0; s < table.memory_slices; ++s) {
      if (!(occ & (1u << s))) free_slices.push_back(s);
    }
    return fail(Rule::kNoPlacement, "no free placement for " + names +
                                        " around the placed instances: free memory slices " +
                                        (free_slices.empty() ? "none" : join_ints(free_slices, ", ")) +
                                        ", and each profile may start only at its listed slots ([UG-start], -lgipp)");
  }
  out.valid = true;
  out.placements = layout;
  for (const auto& e : entries) out.compute_instances.push_back(e.compute_slices);
  out.commands = create_commands(table, layout, -1, out.compute_instances);
  return out;
}

std::vector<std::vector<Placed>> all_layouts(const MigTable& t) {
  std::vector<std::vector<Placed>> out;
  std::vector<Placed> cur;
  std::vector<int> counts(t.profiles.size(), 0);
  int media = 0, compute = 0;
  std::function<void(int, uint32_t)> walk = [&](int slice, uint32_t occ) {
    if (slice >= t.memory_slices) {
      out.push_back(cur);
      return;
    }
    walk(slice + 1, occ);  // leave this slice free
    for (size_t pi = 0; pi < t.profiles.size(); ++pi) {
      const MigProfile& p = t.profiles[pi];
      const uint32_t m = mask_of(slice, p.memory_slices);
      if (!valid_start(p, slice) || slice + p.memory_slices > t.memory_slices || (m & occ)) continue;
      if (counts[pi] >= p.max_count || static_cast<int>(cur.size()) >= t.max_instances) continue;
      if (compute + p.compute_slices > t.compute_slices) continue;
      if (p.media_extensions && media >= kMaxMediaExtensionInstances) continue;
      ++counts[pi];
      media += p.media_extensions ? 1 : 0;
      compute += p.compute_slices;
      cur.push_back(Placed{static_cast<int>(pi), slice});
      walk(slice + p.memory_slices, occ | m);
      cur.pop_back();
      compute -= p.compute_slices;
      media -= p.media_extensions ? 1 : 0;
      --counts[pi];
    }
  };
  walk(0, 0);
  return out;
}

bool is_maximal(const MigTable& table, const std::vector<Placed>& layout) {
  // Valid layouts are closed under removing an instance, so a strict superset exists exactly when
  // the combination plus one instance of some profile has a valid placement.
  const std::vector<int> counts = profile_counts(table, layout);
  auto model = table_model(table);
  for (size_t pi = 0; pi < table.profiles.size(); ++pi) {
    std::vector<int> more = counts;
    ++more[pi];
    if (model) {
      if (model->by_counts.count(more) > 0) return false;
      continue;
    }
    std::vector<LayoutEntry> entries;
    for (size_t q = 0; q < more.size(); ++q) {
      for (int k = 0; k < more[q]; ++k) entries.push_back(LayoutEntry{table.profiles[q].name, std::nullopt, {}});
    }
    auto r = check_layout(table, entries);
    if (r && r->valid) return false;
  }
  return true;
}

bool is_dead_end(const MigTable& table, const std::vector<Placed>& layout) {
  const uint32_t occ = occupancy(table, layout);
  for (size_t pi = 0; pi < table.profiles.size(); ++pi) {
    for (int s : table.profiles[pi].placement_starts) {
      const Placed add{static_cast<int>(pi), s};
      if (s + table.profiles[pi].memory_slices > table.memory_slices || (occupancy(table, {add}) & occ)) continue;
      std::vector<Placed> more = layout;
      more.push_back(add);
      if (first_broken_rule(table, more, nullptr) == Rule::kNone) return false;
    }
  }
  return true;
}

Stranded stranded(const MigTable& table, const std::vector<Placed>& layout) {
  auto model = table_model(table);
  if (!model) return Stranded{};
  const uint64_t bits = model->bits_of(layout);
  auto it = model->by_counts.find(profile_counts(table, layout));
  if (it == model->by_counts.end()) return Stranded{};
  for (int li : it->second) {
    if (model->bits[li] == bits) return model->stranded[li];
  }
  return Stranded{};
}

std::vector<size_t> creation_order(const MigTable& table, const std::vector<Placed>& layout) {
  std::vector<size_t> order(layout.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const MigProfile& pa = table.profiles[layout[a].profile];
    const MigProfile& pb = table.profiles[layout[b].profile];
    if (pa.memory_slices != pb.memory_slices) return pa.memory_slices > pb.memory_slices;
    if (pa.compute_slices != pb.compute_slices) return pa.compute_slices > pb.compute_slices;
    return layout[a].start < layout[b].start;
  });
  return order;
}

std::vector<std::string> create_commands(const MigTable& table, const std::vector<Placed>& layout, int gpu_index,
                                         const std::vector<std::vector<int>>& compute_instances) {
  std::vector<std::string> out;
  if (layout.empty()) return out;
  const std::string dev = gpu_index >= 0 ? " -i " + std::to_string(gpu_index) : "";
  bool split = false;
  for (const auto& ci : compute_instances) split = split || !ci.empty();
  std::string list;
  for (size_t i : creation_order(table, layout)) {
    if (!list.empty()) list += ',';
    list += std::to_string(table.profiles[layout[i].profile].profile_id);
    list += ':';
    list += std::to_string(layout[i].start);
  }
  out.push_back("nvidia-smi mig" + dev + " -cgi " + list + (split ? "" : " -C"));
  if (!split) return out;
  for (size_t i = 0; i < layout.size(); ++i) {
    const MigProfile& p = table.profiles[layout[i].profile];
    std::vector<int> ids;
    if (i < compute_instances.size() && !compute_instances[i].empty()) {
      for (int c : compute_instances[i]) ids.push_back(kCiProfileIdBySlices[c]);
    } else {
      ids.push_back(kCiProfileIdBySlices[std::min(p.compute_slices, kMaxCiSlices)]);
    }
    out.push_back("nvidia-smi mig" + dev + " -cci " + join_ints(ids) + " -gi <GI id of " + p.name + "@" +
                  std::to_string(layout[i].start) + " from nvidia-smi mig -lgi>");
  }
  return out;
}

std::vector<int> profile_counts(const MigTable& table, const std::vector<Placed>& layout) {
  std::vector<int> c(table.profiles.size(), 0);
  for (const auto& p : layout) ++c[p.profile];
  return c;
}

}  // namespace gpuplan::mig

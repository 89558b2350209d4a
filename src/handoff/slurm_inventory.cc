// `scontrol show node -o` -> the agent's inventory (gpuplan/slurm_inventory.h).
#include "gpuplan/slurm_inventory.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace gpuplan::handoff {

namespace {

constexpr int64_t kBytesPerMib = int64_t{1024} * 1024;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A KEY of KEY=VALUE: a letter, then letters, digits or '_' (Slurm's keys: NodeName, CPUAlloc, MCS_label).
bool is_key(std::string_view k) {
  if (k.empty() || !std::isalpha(static_cast<unsigned char>(k.front()))) return false;
  return std::all_of(k.begin(), k.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// The KEY=VALUE words of one line. A word without "KEY=" continues the previous value (OS=Linux 6.1.0 #1
// SMP ..., Reason=some words [root@...]), as scontrol prints values with spaces unquoted.
Result<std::vector<std::pair<std::string, std::string>>> words_of(std::string_view line, size_t line_no) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size()) break;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    const std::string_view word = line.substr(i, j - i);
    const size_t eq = word.find('=');
    if (eq != std::string_view::npos && is_key(word.substr(0, eq))) {
      out.emplace_back(std::string(word.substr(0, eq)), std::string(word.substr(eq + 1)));
    } else if (!out.empty()) {
      out.back().second += " ";
      out.back().second += word;
    }  // words before the first KEY= are ignored
    if (!out.empty() && out.back().second.size() > kMaxSlurmValueBytes) {
      return limit_error("line " + std::to_string(line_no) + ": " + out.back().first + "= is over " +
                             std::to_string(kMaxSlurmValueBytes) + " bytes",
                         "scontrol");
    }
    i = j;
  }
  return out;
}

// "gpu:a100_3g.40gb:2(S:0),gpu:h100:1(S:1)" (Gres=), "gpu:a100_3g.40gb:1(IDX:0),gpu:h100:0(IDX:N/A)"
// (GresUsed=), "gpu:2", "(null)" or empty. Commas inside parentheses (IDX:0,2) belong to the item.
Result<std::vector<GresItem>> parse_gres(std::string_view v, const std::string& where) {
  std::vector<GresItem> out;
  if (v.empty() || v == "(null)" || v == "N/A") return out;
  std::vector<std::string_view> items;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= v.size(); ++i) {
    if (i == v.size() || (v[i] == ',' && depth == 0)) {
      items.push_back(v.substr(start, i - start));
      start = i + 1;
      continue;
    }
    if (v[i] == '(') ++depth;
    if (v[i] == ')') depth = std::max(0, depth - 1);
  }
  if (items.size() > kMaxGresItems) {
    return limit_error(where + " has over " + std::to_string(kMaxGresItems) + " GRES items", "scontrol");
  }
  for (std::string_view item : items) {
    GresItem g;
    if (const size_t p = item.find('('); p != std::string_view::npos) {
      if (item.back() != ')')
        return usage_error(where + ": GRES item '" + std::string(item) + "' has no ')'", "scontrol");
      g.detail = std::string(item.substr(p + 1, item.size() - p - 2));
      item = item.substr(0, p);
    }
    std::vector<std::string_view> parts;
    for (size_t s = 0;;) {
      const size_t c = item.find(':', s);
      parts.push_back(item.substr(s, c == std::string_view::npos ? std::string_view::npos : c - s));
      if (c == std::string_view::npos) break;
      s = c + 1;
    }
    if (parts.size() < 2 || parts.size() > 3 || parts[0].empty()) {
      return usage_error(where + ": GRES item '" + std::string(item) + "' is not name[:type]:count", "scontrol");
    }
    g.name = std::string(parts[0]);
    if (parts.size() == 3) g.type = std::string(parts[1]);
    // Counts may carry a K/M/G suffix (Slurm's suffixes for large counts, e.g. mps:100K); GPUs never do.
    std::string_view count = parts.back();
    int64_t scale = 1;
    if (!count.empty() && (count.back() == 'K' || count.back() == 'M' || count.back() == 'G')) {
      constexpr int64_t kKilo = 1024;  // Slurm's count suffixes are powers of 1024 (slurm.conf, "Gres")
      scale = count.back() == 'K' ? kKilo : count.back() == 'M' ? kKilo * kKilo : kKilo * kKilo * kKilo;
      count.remove_suffix(1);
    }
    // At most 9 digits: times the largest suffix (2^30) that stays far inside int64.
    constexpr size_t kMaxCountDigits = 9;
    if (count.empty() || count.size() > kMaxCountDigits ||
        !std::all_of(count.begin(), count.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return usage_error(where + ": GRES item '" + std::string(item) + "' has no count", "scontrol");
    }
    g.count = std::stoll(std::string(count)) * scale;
    out.push_back(std::move(g));
  }
  return out;
}

// A MIG profile name: <n>g.<m>gb, optionally +me / +gfx / +me.all... ("1g.10gb+me").
bool looks_like_profile(std::string_view s) {
  size_t i = 0;
  auto digits = [&] {
    const size_t b = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i > b;
  };
  if (!digits() || i >= s.size() || s[i++] != 'g' || i >= s.size() || s[i++] != '.' || !digits()) return false;
  if (s.substr(i, 2) != "gb") return false;
  i += 2;
  if (i == s.size()) return true;
  if (s[i] != '+') return false;
  return std::all_of(s.begin() + static_cast<std::ptrdiff_t>(i) + 1, s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.'; }) &&
         i + 1 < s.size();
}

const MigProfile* profile_of(const Catalog& catalog, const Gpu& g, std::string_view profile) {
  if (g.mig_table.empty()) return nullptr;
  const MigTable* t = catalog.find_mig_table(g.mig_table);
  return t == nullptr ? nullptr : t->find(profile);
}

// Words of a name, split on '_', '-', ' ' and '.', without "nvidia" (slurmd's autodetected names start with it).
std::vector<std::string> tokens(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : lower(s)) {
    if (c == '_' || c == '-' || c == ' ' || c == '.') {
      if (!cur.empty() && cur != "nvidia") out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty() && cur != "nvidia") out.push_back(cur);
  return out;
}

// Every token of `want` appears among the GPU's id, name and alias tokens.
bool gpu_matches(const Gpu& g, const std::vector<std::string>& want) {
  std::vector<std::string> have = tokens(g.id);
  for (const std::string& t : tokens(g.name)) have.push_back(t);
  for (const std::string& a : g.aliases) {
    for (const std::string& t : tokens(a)) have.push_back(t);
  }
  return std::all_of(want.begin(), want.end(),
                     [&](const std::string& w) { return std::find(have.begin(), have.end(), w) != have.end(); });
}

}  // namespace

bool SlurmNode::available() const {
  const std::string s = lower(state);
  for (const char* bad : {"down", "drain", "fail", "future", "powered_down", "power_down", "not_responding"}) {
    if (s.find(bad) != std::string::npos) return false;
  }
  return s.find('*') == std::string::npos;  // '*': the node is not responding
}

Result<std::vector<SlurmNode>> parse_scontrol_nodes(std::string_view text) {
  if (text.size() > kMaxScontrolBytes) {
    return limit_error("the scontrol output is over " + std::to_string(kMaxScontrolBytes >> 20) + " MiB", "scontrol");
  }
  std::vector<SlurmNode> nodes;
  size_t line_no = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    GPUPLAN_TRY(words, words_of(line, line_no));
    SlurmNode n;
    const std::string where = "line " + std::to_string(line_no);
    for (const auto& [k, v] : words) {
      if (k == "NodeName") n.name = v;
      if (k == "State") n.state = v;
      if (k == "Gres") {
        GPUPLAN_TRY(g, parse_gres(v, where + " Gres="));
        n.gres = g;
      }
      if (k == "GresUsed") {
        GPUPLAN_TRY(g, parse_gres(v, where + " GresUsed="));
        n.gres_used = g;
      }
    }
    if (n.name.empty()) {
      return usage_error(where + " has no NodeName=: give the output of `scontrol show node -o` (one line a node)",
                         "scontrol");
    }
    if (nodes.size() >= kMaxSlurmNodes) {
      return limit_error("the scontrol output has over " + std::to_string(kMaxSlurmNodes) + " nodes", "scontrol");
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

GresTarget resolve_gres_type(const Catalog& catalog, std::string_view type_in, std::string_view bare_profile_gpu) {
  const std::string type = lower(type_in);
  GresTarget out;
  if (type.empty()) {
    out.why = "an untyped gpu GRES names no GPU model; give types in gres.conf (Type=)";
    return out;
  }
  // "<gpu>_<profile>" or "<profile>".
  std::string gpu_part = type;
  std::string profile;
  if (looks_like_profile(type)) {
    profile = type;
    gpu_part.clear();
  } else if (const size_t us = type.rfind('_'); us != std::string::npos && looks_like_profile(type.substr(us + 1))) {
    profile = type.substr(us + 1);
    gpu_part = type.substr(0, us);
  }
  if (gpu_part.empty() && !profile.empty() && !bare_profile_gpu.empty()) {
    // A bare profile: the GPU model the caller named for them.
    auto ref = catalog.resolve(bare_profile_gpu);
    if (!ref.ok()) {
      out.why = "--gpu-type '" + std::string(bare_profile_gpu) + "': " + ref.error().message;
      return out;
    }
    const MigProfile* p = profile_of(catalog, *ref->gpu, profile);
    if (p == nullptr) {
      out.why = ref->gpu->id + " has no MIG profile " + profile;
      return out;
    }
    out.gpu_id = ref->gpu->id;
    out.profile = p->name;
    return out;
  }
  const std::vector<std::string> want = tokens(gpu_part);
  std::vector<const Gpu*> candidates;
  if (!profile.empty()) {
    for (const Gpu& g : catalog.gpus()) {
      if (profile_of(catalog, g, profile) != nullptr && gpu_matches(g, want)) candidates.push_back(&g);
    }
  } else {
    if (auto ref = catalog.resolve(type); ref.ok() && !ref->is_mig()) {
      out.gpu_id = ref->gpu->id;
      return out;
    }
    for (const Gpu& g : catalog.gpus()) {
      if (!want.empty() && gpu_matches(g, want)) candidates.push_back(&g);
    }
  }
  if (candidates.size() == 1) {
    out.gpu_id = candidates[0]->id;
    out.profile = profile.empty() ? std::string() : profile_of(catalog, *candidates[0], profile)->name;
    return out;
  }
  if (candidates.empty()) {
    out.why = "no catalog GPU" + (profile.empty() ? std::string() : " with MIG profile " + profile) + " matches '" +
              std::string(type_in) + "'";
  } else {
    out.why = "'" + std::string(type_in) + "' matches " + std::to_string(candidates.size()) + " catalog GPUs (";
    for (size_t i = 0; i < candidates.size() && i < 4; ++i) out.why += (i ? ", " : "") + candidates[i]->id;
    out.why += candidates.size() > 4 ? ", ...)" : ")";
    out.why += "; name the model in the GRES type (a100-80gb_3g.40gb)";
  }
  return out;
}

Result<Json> slurm_node_inventory(const Catalog& catalog, const SlurmNode& node, std::string_view bare_profile_gpu) {
  // The node's GPUs: whole GPUs first in GRES order, then the MIG GPUs each model's instances need.
  struct MigGpu {
    const Gpu* gpu;
    const MigTable* table;
    std::vector<bool> memory_used;
    int compute_used = 0;
    Json instances = Json::array();
  };
  Json gpus = Json::array();
  Json unresolved = Json::array();
  std::vector<MigGpu> mig_gpus;
  std::map<std::string, std::vector<const MigProfile*>> mig_instances;  // gpu id -> instances
  std::vector<std::string> mig_order;
  size_t gpu_count = 0;
  auto uuid = [&](size_t n) {
    std::string clean;
    for (char c : node.name) clean += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '-';
    return "SLURM-" + clean + "-" + std::to_string(n);
  };
  auto whole_memory = [](const Gpu& g) {
    const double mib = g.number("memory_total_mib", 0);
    return static_cast<int64_t>(mib > 0 ? mib * kBytesPerMib : g.number("memory_gb", 0) * 1e9);
  };
  for (const GresItem& item : node.gres) {
    if (item.name != "gpu" || item.count == 0) continue;
    if (item.count < 0 || item.count > kMaxGresCountPerItem) {
      return limit_error("node " + node.name + ": gpu:" + item.type + " counts " + std::to_string(item.count) +
                             ", over " + std::to_string(kMaxGresCountPerItem),
                         "scontrol");
    }
    const GresTarget t = resolve_gres_type(catalog, item.type, bare_profile_gpu);
    if (t.gpu_id.empty()) {
      unresolved.push_back(Json{{"type", item.type}, {"count", item.count}, {"why", t.why}});
      continue;
    }
    const Gpu* g = catalog.find_gpu(t.gpu_id);
    if (t.profile.empty()) {
      for (int64_t k = 0; k < item.count; ++k) {
        if (gpu_count >= kMaxSlurmGpusPerNode) {
          return limit_error("node " + node.name + " has over " + std::to_string(kMaxSlurmGpusPerNode) +
                                 " GPUs in its GRES (the market's bound per node)",
                             "scontrol");
        }
        ++gpu_count;
        gpus.push_back(Json{{"uuid", uuid(gpu_count - 1)},
                            {"name", g->id},
                            {"memory_bytes", whole_memory(*g)},
                            {"mig_mode", "disabled"},
                            {"instances", Json::array()}});
      }
      continue;
    }
    if (!mig_instances.count(g->id)) mig_order.push_back(g->id);
    const MigProfile* p = profile_of(catalog, *g, t.profile);
    for (int64_t k = 0; k < item.count; ++k) mig_instances[g->id].push_back(p);
  }
  for (const std::string& id : mig_order) {
    const Gpu* g = catalog.find_gpu(id);
    const MigTable* table = catalog.find_mig_table(g->mig_table);
    std::vector<const MigProfile*>& list = mig_instances[id];
    std::stable_sort(list.begin(), list.end(),
                     [](const MigProfile* a, const MigProfile* b) { return a->memory_slices > b->memory_slices; });
    const size_t first = mig_gpus.size();
    // The first valid placement of `p` on `m`: slices free, compute slices left.
    auto try_place = [&](MigGpu& m, const MigProfile* p) {
      if (m.compute_used + p->compute_slices > table->compute_slices) return false;
      for (int start : p->placement_starts) {
        if (start < 0 || start + p->memory_slices > table->memory_slices) continue;
        bool free = true;
        for (int s = start; s < start + p->memory_slices; ++s) free = free && !m.memory_used[static_cast<size_t>(s)];
        if (!free) continue;
        for (int s = start; s < start + p->memory_slices; ++s) m.memory_used[static_cast<size_t>(s)] = true;
        m.compute_used += p->compute_slices;
        m.instances.push_back(Json{{"profile", p->name}, {"start", start}});
        return true;
      }
      return false;
    };
    for (const MigProfile* p : list) {
      bool placed = false;
      for (size_t k = first; k < mig_gpus.size() && !placed; ++k) placed = try_place(mig_gpus[k], p);
      if (placed) continue;
      if (gpu_count + mig_gpus.size() >= kMaxSlurmGpusPerNode) {
        return limit_error("node " + node.name + ": its MIG instances need over " +
                               std::to_string(kMaxSlurmGpusPerNode) + " GPUs (the market's bound per node)",
                           "scontrol");
      }
      mig_gpus.push_back(MigGpu{g, table,
                                std::vector<bool>(static_cast<size_t>(std::max(0, table->memory_slices)), false), 0,
                                Json::array()});
      if (!try_place(mig_gpus.back(), p)) {
        return invalid_data_error("the catalog's MIG table " + table->id + " has no valid placement for " + p->name,
                                  "scontrol");
      }
    }
  }
  if (gpu_count + mig_gpus.size() > kMaxSlurmGpusPerNode) {
    return limit_error("node " + node.name + " has over " + std::to_string(kMaxSlurmGpusPerNode) +
                           " GPUs in its GRES (the market's bound per node)",
                       "scontrol");
  }
  for (MigGpu& m : mig_gpus) {
    Json instances = std::move(m.instances);
    std::sort(instances.begin(), instances.end(),
              [](const Json& a, const Json& b) { return a["start"].get<int>() < b["start"].get<int>(); });
    gpus.push_back(Json{{"uuid", uuid(gpu_count++)},
                        {"name", m.gpu->id},
                        {"memory_bytes", whole_memory(*m.gpu)},
                        {"mig_mode", "enabled"},
                        {"instances", std::move(instances)}});
  }
  Json inv{{"driver_version", "slurm"}, {"features_off", Json::array({"pci"})}, {"gpus", std::move(gpus)}};
  if (!unresolved.empty()) inv["unresolved"] = std::move(unresolved);
  return inv;
}

Result<Json> slurm_inventory_json(const Catalog& catalog, const std::vector<SlurmNode>& nodes,
                                  std::string_view bare_profile_gpu) {
  Json out = Json::array();
  for (const SlurmNode& n : nodes) {
    Json gres = Json::array();
    for (const GresItem& g : n.gres) {
      if (g.name != "gpu") continue;
      int64_t used = 0;
      for (const GresItem& u : n.gres_used) {
        if (u.name == g.name && u.type == g.type) used = u.count;
      }
      const GresTarget t = resolve_gres_type(catalog, g.type, bare_profile_gpu);
      gres.push_back(Json{{"type", g.type},
                          {"count", g.count},
                          {"used", used},
                          {"gpu", t.gpu_id.empty() ? Json(nullptr) : Json(t.gpu_id)},
                          {"profile", t.profile.empty() ? Json(nullptr) : Json(t.profile)}});
    }
    // One node's impossible GRES (over the bounds) is that node's error, not the import's.
    auto inv = slurm_node_inventory(catalog, n, bare_profile_gpu);
    Json row{{"node", n.name},
             {"state", n.state},
             {"available", n.available()},
             {"gres", std::move(gres)},
             {"inventory", inv.ok() ? *inv : Json(nullptr)}};
    if (!inv.ok())
      row["error"] = Json{{"code", std::string(error_code_name(inv.error().code))}, {"message", inv.error().message}};
    out.push_back(std::move(row));
  }
  return Json{{"nodes", std::move(out)}};
}

}  // namespace gpuplan::handoff

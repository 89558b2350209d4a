// Fleet and request files (YAML; JSON is YAML too). Errors name the file, the entry and the field.
#include <set>

#include "catalog/yaml_util.h"
#include "core/request.h"
#include "gpuplan/cancel.h"
#include "gpuplan/mig_pack.h"

namespace gpuplan::mig {

namespace {

// Upper bounds that catch typos (a count of 1e9) and hostile inputs before they cost memory or time;
// each is refused with ErrorCode::kLimit naming it.
// GPUs in a whole fleet (sum of counts, non-MIG entries included): ten times the fleet benchmark
// (bench/mig_bench.cc). The largest input the bounds admit (100,000 GPUs, 700,000 instances in 9,000
// lines) packs in 2.5 s of CPU and 400 MB, a 77 MB plan (2026-12-01, load 8 on 2 cores), inside the
// server's 10 s command time.
constexpr int kMaxFleetGpus = 100000;
// Nodes in a fleet: every node holds at least one GPU in practice; 100,000 GPUs at 8 a node is 12,500.
constexpr size_t kMaxFleetNodes = 20000;
// Request lines: twice the 4,800 lines of the fleet benchmark (bench/mig_bench.cc), and about what a
// 1 MiB server body holds; the packer handles each line once per fleet target, but a workload line
// runs the fit model once per target, which the server's deadline (cancellation) bounds.
constexpr size_t kMaxRequestLines = 10000;
// Instances requested over all lines: a fleet of kMaxFleetGpus holds at most 7 instances a GPU
// (700,000), so more can never be placed; the solver works on counts per class, so the bound only
// keeps the plan's unplaced counts and priority sums inside int.
constexpr long long kMaxRequestedInstances = 1000000;
// MIG instances one GPU holds at most: 7 (the 1g profiles of a 7-slice table, NVIDIA MIG user guide).
constexpr int kMaxInstancesPerGpu = 7;

Result<ExistingInstance> parse_instance(const std::string& file, const YAML::Node& n, const std::string& entry,
                                        const MigTable& table) {
  GPUPLAN_CHECK(yaml::check_keys(file, n, entry, {"profile", "start", "busy", "name"}));
  GPUPLAN_TRY(profile, yaml::get_string(file, n, entry, "profile", true));
  GPUPLAN_TRY(start, yaml::get_int(file, n, entry, "start", true));
  GPUPLAN_TRY(busy, yaml::get_bool(file, n, entry, "busy", false, false));
  GPUPLAN_TRY(name, yaml::get_string(file, n, entry, "name", false));
  ExistingInstance inst;
  inst.busy = busy;
  inst.name = name;
  inst.placed.start = start;
  inst.placed.profile = -1;
  for (size_t i = 0; i < table.profiles.size(); ++i) {
    if (table.profiles[i].name == profile) inst.placed.profile = static_cast<int>(i);
  }
  if (inst.placed.profile < 0) {
    std::string list;
    for (const auto& p : table.profiles) list += (list.empty() ? "" : ", ") + p.name;
    return yaml::data_error(file, n["profile"], entry, "profile",
                            "'" + profile + "' is not a profile of MIG table " + table.id + " (" + list + ")");
  }
  return inst;
}

Status parse_gpu_entry(const Catalog& catalog, const std::string& file, const YAML::Node& n, const std::string& node,
                       const std::string& entry, Fleet& fleet, int& next_index, int& gpus_total) {
  if (auto s = yaml::check_keys(file, n, entry, {"target", "count", "instances"}); !s) return s;
  GPUPLAN_TRY(target, yaml::get_string(file, n, entry, "target", true));
  GPUPLAN_TRY(count, yaml::get_int(file, n, entry, "count", false, 1));
  if (count < 1) return yaml::data_error(file, n["count"], entry, "count", "must be at least 1");
  if (count > kMaxFleetGpus - gpus_total) {
    return limit_error(yaml::where(file, n["count"]) + ": " + entry + ": field 'count': the fleet has more than " +
                           std::to_string(kMaxFleetGpus) + " GPUs (limit kMaxFleetGpus); split it into several plans",
                       file + ": " + entry + ": count");
  }
  auto ref = catalog.resolve(target);
  if (!ref) return yaml::data_error(file, n["target"], entry, "target", ref.error().message);
  if (ref->profile) return yaml::data_error(file, n["target"], entry, "target", "give a GPU, not a MIG profile");
  const YAML::Node instances = n["instances"];
  if (instances && count != 1) {
    return yaml::data_error(file, instances, entry, "instances",
                            "instances describe one GPU: use count 1 (or omit count)");
  }
  if (!ref->mig_table) {
    fleet.warnings.push_back(entry + ": " + ref->gpu->id + " does not support MIG; left out");
    next_index += count;
    gpus_total += count;
    return Status::Ok();
  }
  FleetGpu g;
  g.node = node;
  g.gpu = ref->gpu;
  g.table = ref->mig_table;
  if (instances) {
    if (!instances.IsSequence()) return yaml::data_error(file, instances, entry, "instances", "expected a list");
    if (instances.size() > static_cast<size_t>(g.table->max_instances)) {
      return yaml::data_error(file, instances, entry, "instances",
                              std::to_string(instances.size()) + " instances; a " + g.gpu->id + " holds at most " +
                                  std::to_string(g.table->max_instances));
    }
    for (size_t i = 0; i < instances.size(); ++i) {
      GPUPLAN_TRY(inst, parse_instance(file, instances[i], entry + ": instances[" + std::to_string(i) + "]", *g.table));
      g.instances.push_back(inst);
    }
    std::vector<Placed> layout;
    for (const auto& inst : g.instances) layout.push_back(inst.placed);
    std::string reason;
    if (first_broken_rule(*g.table, layout, &reason) != Rule::kNone) {
      return yaml::data_error(file, instances, entry, "instances",
                              "the existing instances are not a valid layout: " + reason);
    }
  }
  for (int c = 0; c < count; ++c) {
    g.index = next_index++;
    fleet.gpus.push_back(g);
  }
  gpus_total += count;
  return Status::Ok();
}

}  // namespace

Result<Fleet> parse_fleet(const Catalog& catalog, const std::string& file, std::string_view text) {
  GPUPLAN_TRY(doc, yaml::parse(file, text));
  GPUPLAN_CHECK(yaml::check_keys(file, doc, "fleet", {"nodes"}));
  const YAML::Node nodes = (doc)["nodes"];
  if (!nodes || !nodes.IsSequence()) return yaml::data_error(file, doc, "fleet", "nodes", "expected a list of nodes");
  if (nodes.size() > kMaxFleetNodes) {
    return limit_error(yaml::where(file, nodes) + ": fleet: field 'nodes': " + std::to_string(nodes.size()) +
                           " nodes, more than " + std::to_string(kMaxFleetNodes) +
                           " (limit kMaxFleetNodes); split the fleet into several plans",
                       file + ": fleet: nodes");
  }
  Fleet fleet;
  std::set<std::string> names;
  int gpus_total = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (cancel_requested()) return cancelled_error();
    const YAML::Node n = nodes[i];
    std::string entry = "nodes[" + std::to_string(i) + "]";
    GPUPLAN_CHECK(yaml::check_keys(file, n, entry, {"name", "gpus"}));
    GPUPLAN_TRY(name, yaml::get_string(file, n, entry, "name", true));
    entry = "node " + name;
    if (!names.insert(name).second) return yaml::data_error(file, n["name"], entry, "name", "duplicate node name");
    const YAML::Node gpus = n["gpus"];
    if (!gpus || !gpus.IsSequence()) return yaml::data_error(file, n, entry, "gpus", "expected a list of GPUs");
    int next_index = 0;
    for (size_t j = 0; j < gpus.size(); ++j) {
      if (auto s = parse_gpu_entry(catalog, file, gpus[j], name, entry + ": gpus[" + std::to_string(j) + "]", fleet,
                                   next_index, gpus_total);
          !s) {
        return s.error();
      }
    }
  }
  return fleet;
}

Result<std::vector<PackRequest>> parse_requests(const Catalog& catalog, const std::string& file,
                                                std::string_view text) {
  GPUPLAN_TRY(doc, yaml::parse(file, text));
  GPUPLAN_CHECK(yaml::check_keys(file, doc, "requests file", {"requests"}));
  const YAML::Node list = (doc)["requests"];
  if (!list || !list.IsSequence()) return yaml::data_error(file, doc, "", "requests", "expected a list of requests");
  if (list.size() > kMaxRequestLines) {
    return limit_error(yaml::where(file, list) + ": field 'requests': " + std::to_string(list.size()) +
                           " requests, more than " + std::to_string(kMaxRequestLines) +
                           " (limit kMaxRequestLines); merge lines that ask for the same profile with 'count'",
                       file + ": requests");
  }
  std::vector<PackRequest> out;
  std::set<std::string> names;
  long long instances_total = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    if (cancel_requested()) return cancelled_error();
    const YAML::Node n = list[i];
    std::string entry = "requests[" + std::to_string(i) + "]";
    if (auto s = yaml::check_keys(
            file, n, entry,
            {"name", "tenant", "count", "priority", "profile", "memory_gb", "compute_slices", "workload", "target"});
        !s) {
      return s.error();
    }
    PackRequest rq;
    GPUPLAN_TRY(name, yaml::get_string(file, n, entry, "name", true));
    rq.name = name;
    entry = "request " + rq.name;
    if (!names.insert(rq.name).second)
      return yaml::data_error(file, n["name"], entry, "name", "duplicate request name");
    GPUPLAN_TRY(tenant, yaml::get_string(file, n, entry, "tenant", false));
    GPUPLAN_TRY(count, yaml::get_int(file, n, entry, "count", false, 1));
    GPUPLAN_TRY(priority, yaml::get_int(file, n, entry, "priority", false, 0));
    GPUPLAN_TRY(profile, yaml::get_string(file, n, entry, "profile", false));
    GPUPLAN_TRY(memory, yaml::get_number(file, n, entry, "memory_gb", false, 0));
    GPUPLAN_TRY(compute, yaml::get_int(file, n, entry, "compute_slices", false, 0));
    GPUPLAN_TRY(target, yaml::get_string(file, n, entry, "target", false));
    if (count < 1) return yaml::data_error(file, n["count"], entry, "count", "must be at least 1");
    instances_total += count;
    if (instances_total > kMaxRequestedInstances) {
      std::string msg = yaml::where(file, n["count"]);
      msg += ": " + entry + ": field 'count': more than " + std::to_string(kMaxRequestedInstances);
      msg += " instances requested in all (limit kMaxRequestedInstances; a fleet of at most ";
      msg += std::to_string(kMaxFleetGpus) + " GPUs holds at most " + std::to_string(kMaxInstancesPerGpu) + " each)";
      std::string field = file;
      field += ": " + entry + ": count";
      return limit_error(msg, field);
    }
    if (memory < 0) return yaml::data_error(file, n["memory_gb"], entry, "memory_gb", "must not be negative");
    if (compute < 0)
      return yaml::data_error(file, n["compute_slices"], entry, "compute_slices", "must not be negative");
    rq.tenant = tenant;
    rq.count = count;
    rq.priority = priority;
    if (!target.empty()) {
      auto ref = catalog.resolve(target);
      if (!ref) return yaml::data_error(file, n["target"], entry, "target", ref.error().message);
      rq.target = ref->gpu->id;
    }
    const bool has_resources = n["memory_gb"] || n["compute_slices"];
    const int kinds = (!profile.empty() ? 1 : 0) + (has_resources ? 1 : 0) + (n["workload"] ? 1 : 0);
    if (kinds != 1) {
      return yaml::data_error(file, n, entry, "profile",
                              "give exactly one of: profile, memory_gb/compute_slices, workload");
    }
    if (!profile.empty()) {
      rq.kind = PackRequest::Kind::kProfile;
      rq.profile = profile;
    } else if (has_resources) {
      rq.kind = PackRequest::Kind::kResources;
      rq.memory_gb = memory;
      rq.compute_slices = compute;
    } else {
      if (!n["workload"].IsMap())
        return yaml::data_error(file, n["workload"], entry, "workload", "expected the options of gpuplan fit");
      rq.kind = PackRequest::Kind::kWorkload;
      auto workload = yaml::to_json(n["workload"], file);  // moved below, so not GPUPLAN_TRY (const)
      if (!workload) return workload.error();
      // The keys of gpuplan fit (data/options.yaml): a misspelt key must not be silently ignored.
      if (auto keys = Request(*workload, "fit").check_keys(); !keys) {
        return yaml::data_error(file, n["workload"], entry, "workload", keys.error().message);
      }
      rq.workload = std::move(*workload);
    }
    out.push_back(std::move(rq));
  }
  return out;
}

}  // namespace gpuplan::mig

// Exports of a pack plan: mig-parted v1 config (NVIDIA/mig-parted api/spec/v1/spec.go), Kubernetes
// (GPU Operator MIG manager label nvidia.com/mig.config, device plugin mixed-strategy resources) and
// Slurm (gres.conf AutoDetect=nvml, slurm.conf Gres= with MIG types, slurm.schedmd.com/gres.html).
#include <map>
#include <set>
#include <sstream>

#include "gpuplan/mig_pack.h"

namespace gpuplan::mig {

namespace {

// Profile name -> count of the planned layout of one GPU, in table order.
std::vector<std::pair<std::string, int>> device_counts(const Fleet& fleet, const GpuPlan& plan) {
  const MigTable& t = *fleet.gpus[plan.gpu].table;
  std::vector<int> c(t.profiles.size(), 0);
  for (const auto& u : plan.layout) ++c[u.placed.profile];
  std::vector<std::pair<std::string, int>> out;
  for (size_t p = 0; p < c.size(); ++p) {
    if (c[p] > 0) out.emplace_back(t.profiles[p].name, c[p]);
  }
  return out;
}

// Nodes in fleet order with their plans.
std::vector<std::pair<std::string, std::vector<const GpuPlan*>>> by_node(const Fleet& fleet, const PackResult& r) {
  std::vector<std::pair<std::string, std::vector<const GpuPlan*>>> out;
  for (const auto& plan : r.gpus) {
    const std::string& node = fleet.gpus[plan.gpu].node;
    if (out.empty() || out.back().first != node) out.push_back({node, {}});
    out.back().second.push_back(&plan);
  }
  return out;
}

}  // namespace

std::string node_config_label(const std::string& node) { return "gpuplan-" + node; }

std::string kubernetes_resource(const std::string& profile) {
  std::string name = "nvidia.com/mig-" + profile;
  for (char& c : name) {
    if (c == '+') c = '.';
  }
  return name;
}

std::string export_mig_parted(const Fleet& fleet, const PackResult& r) {
  std::ostringstream os;
  os << "# mig-parted config written by gpuplan mig pack: one label per node, one entry per group of\n"
        "# GPUs with the same instances. Apply with: nvidia-mig-parted apply -f <file> -c <label>\n"
        "# mig-parted creates the counts, not the placements: it clears a GPU that changes (busy instances\n"
        "# included) and lets the driver place; use the plan's nvidia-smi commands to keep placements.\n";
  os << "version: v1\nmig-configs:\n";
  for (const auto& [node, plans] : by_node(fleet, r)) {
    os << "  " << node_config_label(node) << ":\n";
    std::map<std::vector<std::pair<std::string, int>>, std::vector<int>> groups;
    std::vector<std::vector<std::pair<std::string, int>>> order;
    for (const GpuPlan* plan : plans) {
      auto counts = device_counts(fleet, *plan);
      if (!groups.count(counts)) order.push_back(counts);
      groups[counts].push_back(fleet.gpus[plan->gpu].index);
    }
    for (const auto& counts : order) {
      os << "    - devices: [";
      const auto& idx = groups[counts];
      for (size_t i = 0; i < idx.size(); ++i) os << (i ? ", " : "") << idx[i];
      os << "]\n      mig-enabled: true\n      mig-devices:";
      if (counts.empty()) os << " {}";
      os << "\n";
      for (const auto& [name, n] : counts) os << "        \"" << name << "\": " << n << "\n";
    }
  }
  return os.str();
}

std::string export_kubernetes(const Fleet& fleet, const std::vector<PackRequest>& requests, const PackResult& r) {
  std::ostringstream os;
  os << "# Kubernetes with the NVIDIA GPU Operator: the MIG manager applies the mig-parted config named by\n"
        "# each node's nvidia.com/mig.config label; the device plugin (mig.strategy=mixed) advertises one\n"
        "# resource per profile. Steps: apply the ConfigMap, point the ClusterPolicy's migManager.config.name\n"
        "# at it, label the nodes (cordon and drain busy nodes first: the MIG manager does not evict pods).\n";
  os << "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gpuplan-mig-parted-config\n  namespace: gpu-operator\n"
        "data:\n  config.yaml: |\n";
  std::istringstream parted(export_mig_parted(fleet, r));
  for (std::string line; std::getline(parted, line);) os << "    " << line << "\n";
  os << "---\n# Node labels:\n";
  for (const auto& [node, plans] : by_node(fleet, r)) {
    os << "#   kubectl label node " << node << " nvidia.com/mig.config=" << node_config_label(node) << " --overwrite\n";
  }
  os << "# Resources each node will advertise:\n";
  for (const auto& [node, plans] : by_node(fleet, r)) {
    std::map<std::string, int> total;
    for (const GpuPlan* plan : plans) {
      for (const auto& [name, n] : device_counts(fleet, *plan)) total[kubernetes_resource(name)] += n;
    }
    os << "#   " << node << ":";
    if (total.empty()) os << " (none)";
    for (const auto& [res, n] : total) os << " " << res << "=" << n;
    os << "\n";
  }
  os << "# What each request's pods ask for (resources.limits, one instance per pod):\n";
  std::map<int, std::map<std::string, int>> per_request;
  for (const auto& plan : r.gpus) {
    for (const auto& u : plan.layout) {
      if (u.request < 0) continue;
      per_request[u.request][kubernetes_resource(fleet.gpus[plan.gpu].table->profiles[u.placed.profile].name)]++;
    }
  }
  for (const auto& [req, res] : per_request) {
    os << "#   " << requests[req].name;
    if (!requests[req].tenant.empty()) os << " (tenant " << requests[req].tenant << ")";
    os << ":";
    for (const auto& [name, n] : res) os << " " << n << " x {" << name << ": 1}";
    os << "\n";
  }
  return os.str();
}

std::string export_slurm(const Fleet& fleet, const PackResult& r) {
  std::ostringstream os;
  os << "# Slurm (>= 21.08): slurmd finds MIG devices through NVML; partition the GPUs first (Slurm does not\n"
        "# create MIG instances). Each GRES type is the profile name, a substring of the MIG profile slurmd logs.\n";
  os << "# --- gres.conf (every node) ---\nAutoDetect=nvml\n# --- slurm.conf ---\nGresTypes=gpu\n";
  std::set<std::string> types;
  for (const auto& [node, plans] : by_node(fleet, r)) {
    std::map<std::string, int> total;
    std::vector<std::string> order;
    for (const GpuPlan* plan : plans) {
      for (const auto& [name, n] : device_counts(fleet, *plan)) {
        if (!total.count(name)) order.push_back(name);
        total[name] += n;
      }
    }
    if (order.empty()) continue;
    os << "NodeName=" << node << " Gres=";
    for (size_t i = 0; i < order.size(); ++i) {
      os << (i ? "," : "") << "gpu:" << order[i] << ":" << total[order[i]];
      types.insert(order[i]);
    }
    os << "\n";
  }
  os << "AccountingStorageTRES=gres/gpu";
  for (const auto& t : types) os << ",gres/gpu:" << t;
  os << "\n";
  return os.str();
}

}  // namespace gpuplan::mig

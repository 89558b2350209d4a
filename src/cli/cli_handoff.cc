// `gpuplan k8s render` and `gpuplan nodes import-slurm` (issue #15, hand-off): thin CLI rows over the pure
// renderer (gpuplan/k8s.h) and the Slurm inventory parser (gpuplan/slurm_inventory.h). Local commands:
// no server, no store; `k8s render --apply` runs kubectl, `nodes import-slurm --from-scontrol` runs
// `scontrol show node -o`, both through run_process below.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/cli_handoff.h"
#include "gpuplan/k8s.h"
#include "gpuplan/slurm_inventory.h"

extern char** environ;

namespace gpuplan::cli {

namespace {

constexpr size_t kMaxRentalFileBytes = 1 << 20;      // a rental is well under 1 KiB; tenant_rentals ~ 1024 of them
constexpr size_t kMaxProcessOutputBytes = 16 << 20;  // kubectl's and scontrol's answers; more is cut

struct HandoffCli {
  CLI::App* render = nullptr;
  CLI::App* import_slurm = nullptr;
  std::string rental_json;
  handoff::K8sRental rental;
  std::string mode = "device-plugin";
  std::vector<std::string> command;
  bool apply = false;
  handoff::KubectlConfig kubectl;
  std::string slurm_file;
  bool from_scontrol = false;
  std::string node;
  std::string bare_profile_gpu;
};
HandoffCli& state() {
  static HandoffCli s;
  return s;
}

Result<std::string> read_file(const std::string& path, size_t max_bytes, const std::string& field) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{ErrorCode::kNotFound, "cannot read " + path, field};
  std::string text(max_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > max_bytes) {
    return limit_error(path + " is over " + std::to_string(max_bytes) + " bytes", field);
  }
  return text;
}

// The one process runner (handoff::run_process): kubectl gets the manifest list on stdin.
Result<handoff::ProcessResult> run_process(const std::vector<std::string>& argv, const std::string& in) {
  return handoff::run_process(argv, in);
}

int print_json(const Json& j) {
  std::cout << j.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
  return 0;
}

int run_render(const OutputFormat& fmt, const std::function<int(Error)>& report) {
  HandoffCli& st = state();
  handoff::K8sOptions options;
  auto mode = handoff::parse_k8s_mode(st.mode);
  if (!mode) return report(mode.error());
  options.mode = *mode;
  options.command = st.command;
  handoff::K8sRental rental = st.rental;
  if (!st.rental_json.empty()) {
    auto text = read_file(st.rental_json, kMaxRentalFileBytes, "rental-json");
    if (!text) return report(text.error());
    Json j = Json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return report(usage_error(st.rental_json + " is not a JSON object", "rental-json"));
    if (j.contains("tenant_rentals")) {
      if (!j["tenant_rentals"].is_array())
        return report(usage_error("tenant_rentals must be a list", "tenant_rentals"));
      for (const Json& t : j["tenant_rentals"]) {
        auto r = handoff::k8s_rental_from_json(t);
        if (!r) return report(r.error());
        options.tenant_rentals.push_back(*r);
      }
      j.erase("tenant_rentals");
    }
    auto r = handoff::k8s_rental_from_json(j);
    if (!r) return report(r.error());
    rental = *r;
  }
  auto manifests = handoff::render_kubernetes(rental, options);
  if (!manifests) return report(manifests.error());
  if (!st.apply) {
    std::cout << handoff::manifest_list_text(*manifests);
    return 0;
  }
  auto res = handoff::kubectl_apply(*manifests, st.kubectl, run_process);
  if (!res) return report(res.error());
  if (fmt.json) return print_json(Json{{"applied", manifests->size()}, {"kubectl", res->out}});
  std::cout << res->out;
  return 0;
}

int run_import(const Catalog& catalog, const std::function<int(Error)>& report) {
  HandoffCli& st = state();
  if (st.slurm_file.empty() == !st.from_scontrol) {
    return report(
        usage_error("give --file F (the output of `scontrol show node -o`) or --from-scontrol (one)", "file"));
  }
  std::string text;
  if (st.from_scontrol) {
    auto res = run_process({"scontrol", "show", "node", "-o"}, "");
    if (!res) return report(res.error());
    if (res->exit_code != 0) {
      return report(
          Error{ErrorCode::kUnavailable,
                "scontrol show node -o exited " + std::to_string(res->exit_code) + ": " + res->err.substr(0, 2000),
                "from-scontrol"});
    }
    text = res->out;
  } else {
    auto t = read_file(st.slurm_file, handoff::kMaxScontrolBytes, "file");
    if (!t) return report(t.error());
    text = *t;
  }
  auto nodes = handoff::parse_scontrol_nodes(text);
  if (!nodes) return report(nodes.error());
  if (!st.node.empty()) {
    for (const handoff::SlurmNode& n : *nodes) {
      if (n.name != st.node) continue;
      auto inv = handoff::slurm_node_inventory(catalog, n, st.bare_profile_gpu);
      if (!inv) return report(inv.error());
      return print_json(*inv);  // the body of PUT /agent/inventory, less seq and boot_id
    }
    return report(not_found_error("no node " + st.node + " in the scontrol output", "node"));
  }
  auto all = handoff::slurm_inventory_json(catalog, *nodes, st.bare_profile_gpu);
  if (!all) return report(all.error());
  return print_json(*all);
}

}  // namespace

void add_handoff_commands(CLI::App& app) {
  HandoffCli& st = state();
  CLI::App* k8s = app.add_subcommand("k8s", "Hand a rental to Kubernetes: render (and apply) its manifests");
  k8s->require_subcommand(1);
  st.render = k8s->add_subcommand(
      "render", "The rental's Namespace, ResourceQuota, renter credential, [ResourceClaim] and Pod as a JSON List");
  CLI::App* r = st.render;
  r->add_option("--rental-json", st.rental_json,
                "A JSON file with the rental's fields (rental_id, generation, tenant_id, ...; tenant_rentals for the "
                "quota); replaces the options below");
  r->add_option("--rental-id", st.rental.rental_id, "The rental's id (r_...)");
  r->add_option("--generation", st.rental.generation, "The rental's generation")->check(CLI::Range(0, 1 << 30));
  r->add_option("--tenant", st.rental.tenant_id, "The tenant's id (t_...): the namespace is gpuplan-t<id>");
  r->add_option("--tenant-name", st.rental.tenant_name, "The tenant's name (an annotation)");
  r->add_option("--node-id", st.rental.node_id, "The market's node id (a label)");
  r->add_option("--node", st.rental.node_name, "The Kubernetes node name the Pod is pinned to");
  r->add_option("--gpu-uuid", st.rental.gpu_uuid, "The GPU's UUID (GPU-...)");
  r->add_option("--gpu-type", st.rental.gpu_type, "The catalog id of the GPU");
  r->add_option("--profile", st.rental.mig_profile, "The MIG profile (3g.40gb); none: the whole GPU");
  r->add_option("--placement", st.rental.placement_start, "The MIG placement start")->check(CLI::Range(0, 63));
  r->add_option("--image", st.rental.image, "The container image");
  r->add_option("--mode", st.mode, "device-plugin (nvidia.com/mig-<profile>) or dra (resource.k8s.io/v1 claim)")
      ->check(CLI::IsMember({"device-plugin", "dra"}))
      ->default_str("device-plugin");
  r->add_option("--command", st.command, "The container's command (repeat for each word)");
  r->add_flag("--apply", st.apply, "Apply with kubectl (server-side) instead of printing; needs --kubeconfig");
  r->add_option("--kubeconfig", st.kubectl.kubeconfig, "The kubeconfig kubectl uses");
  r->add_option("--context", st.kubectl.context, "The kubeconfig context");
  r->add_option("--kubectl", st.kubectl.kubectl, "The kubectl binary")->default_str("kubectl");

  CLI::App* nodes = nullptr;
  for (CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == "nodes") nodes = sub;
  }
  if (nodes == nullptr) nodes = app.add_subcommand("nodes", "A provider's nodes");
  st.import_slurm = nodes->add_subcommand(
      "import-slurm", "A Slurm cluster's GPUs (scontrol show node -o GRES) as the inventory an agent reports");
  st.import_slurm->add_option("--file", st.slurm_file, "A file holding the output of `scontrol show node -o`");
  st.import_slurm->add_flag("--from-scontrol", st.from_scontrol, "Run `scontrol show node -o` here");
  st.import_slurm->add_option("--node", st.node, "Print only this node's inventory (the PUT /agent/inventory body)");
  st.import_slurm->add_option("--gpu-type", st.bare_profile_gpu,
                              "The GPU model of bare MIG profile types (gpu:3g.40gb, as `mig pack --export slurm` "
                              "writes them)");
}

bool handoff_requested() {
  const HandoffCli& st = state();
  return (st.render && st.render->parsed()) || (st.import_slurm && st.import_slurm->parsed());
}

int run_handoff(const Catalog& catalog, const OutputFormat& fmt, const std::function<int(Error)>& report) {
  const HandoffCli& st = state();
  if (st.render && st.render->parsed()) return run_render(fmt, report);
  return run_import(catalog, report);
}

}  // namespace gpuplan::cli

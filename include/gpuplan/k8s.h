// Kubernetes hand-off of a rental (issue #15): the manifests that give a tenant the GPU or MIG slice it
// rented on a node of a Kubernetes cluster, rendered as JSON (Kubernetes takes JSON manifests, and JSON
// needs no YAML quoting rules), and the kubectl command line that applies them. Pure functions: no
// cluster, no file and no process is touched here; applying goes through an injected ProcessRunner.
//
// Two modes, one per way a cluster exposes NVIDIA GPUs:
//   - kDevicePlugin: the NVIDIA device plugin with the mixed MIG strategy. The Pod asks for the extended
//     resource `nvidia.com/mig-3g.40gb: 1` (a whole GPU: `nvidia.com/gpu: 1`). The plugin picks the
//     device, so the GPU UUID and the placement are NOT enforced; the node is.
//   - kDra: Dynamic Resource Allocation, `resource.k8s.io/v1` (GA in Kubernetes 1.34, served by every
//     release since; the v1beta1 and v1beta2 it replaces are deprecated). A ResourceClaim on the
//     DeviceClass `mig.nvidia.com` (a whole GPU: `gpu.nvidia.com`) of NVIDIA's DRA driver
//     (NVIDIA/k8s-dra-driver-gpu), with a CEL selector on the driver's attributes `profile` and
//     `parentUUID` (a whole GPU: `uuid`) and on the capacity `memorySlice<start>` the driver publishes
//     for every memory slice an instance covers, so the claim gets exactly the slice the market placed.
//
// Always: a Namespace per tenant (gpuplan-t<tenant id>), a ResourceQuota in it that caps the tenant's GPU
// requests at what it rented, a ServiceAccount + Role + RoleBinding scoped to that namespace (the renter's
// credential), and the Pod pinned to the node (nodeSelector kubernetes.io/hostname), labelled with the
// rental, its generation and the tenant. Names derive from the rental id and generation, so applying the
// same rendering twice is a no-op and a new generation is a new Pod.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/api.h"
#include "gpuplan/handoff.h"
#include "gpuplan/status.h"

namespace gpuplan::handoff {

// What the renderer needs of a rental (the market's hand-off row; the outbox worker fills it).
struct K8sRental {
  std::string rental_id;        // "r_0123abcd..." (the market's id)
  int64_t generation = 0;       // the rental's version: names carry it
  std::string tenant_id;        // "t_0123abcd..."
  std::string tenant_name;      // any text a person chose: an annotation only, never a name or label
  std::string node_id;          // the market's node id (a label)
  std::string node_name;        // the Kubernetes node name (kubernetes.io/hostname)
  std::string gpu_uuid;         // "GPU-..." (NVML)
  std::string gpu_type;         // the catalog id ("a100-80gb-sxm4")
  std::string mig_profile;      // "3g.40gb", or empty for the whole GPU
  int placement_start = 0;      // MIG placement start (memory slice); 0 for a whole GPU
  std::string image;            // the rental template's container image
  std::string slurm_gres_type;  // unused here (the Slurm hand-off's)
};

// A rental from JSON, keys as the struct's fields (the hand-off row): strings, integers for generation
// and placement_start; an unknown key or a wrong type is a usage error naming the key.
Result<K8sRental> k8s_rental_from_json(const Json& j);

enum class K8sMode { kDevicePlugin, kDra };
std::string_view to_string(K8sMode mode);
Result<K8sMode> parse_k8s_mode(std::string_view word);  // "device-plugin" | "dra"

struct K8sOptions {
  K8sMode mode = K8sMode::kDevicePlugin;
  // The tenant's live rentals on this cluster, this one included, for the ResourceQuota (a namespace
  // has one quota, so it counts them all). Empty: this rental alone.
  std::vector<K8sRental> tenant_rentals;
  // The container's command; empty: the image's entrypoint.
  std::vector<std::string> command;
  // false: the quota counts tenant_rentals only (a stop recomputes it without the stopped rental; with
  // none left the rental's resource is capped at 0).
  bool count_self = true;
};

// One object to apply.
struct Manifest {
  std::string kind;  // "Pod"
  std::string name;  // "gpuplan-r0123abcd-g3"
  std::string ns;    // its namespace; empty for a Namespace
  Json object;       // the manifest
  std::string text;  // object as JSON, two-space indented, ending in a newline
};

// Bounds (Kubernetes' own where it has one).
inline constexpr size_t kMaxDnsLabelBytes = 63;       // RFC 1123 label (namespaces, pods, label values)
inline constexpr size_t kMaxDnsSubdomainBytes = 253;  // RFC 1123 subdomain (node names)
inline constexpr size_t kMaxImageBytes = 512;         // an image reference; Docker's repository name is at most 255
inline constexpr size_t kMaxTenantNameBytes = 128;    // market::kMaxNameBytes
inline constexpr size_t kMaxCommandItems = 64;        // a container command of more words is not a template's
inline constexpr size_t kMaxCommandItemBytes = 4096;
inline constexpr size_t kMaxTenantRentals = 1024;  // rentals one quota counts

// Kubernetes' name rules (k8s.io/apimachinery/pkg/util/validation).
bool is_dns1123_label(std::string_view s);      // [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63
bool is_dns1123_subdomain(std::string_view s);  // labels joined by '.', at most 253
bool is_label_value(std::string_view s);        // empty, or [A-Za-z0-9]([-_.A-Za-z0-9]*[A-Za-z0-9])?, at most 63
// A container image reference: [host[:port]/]path[:tag][@algo:hex], the distribution reference grammar.
bool is_image_reference(std::string_view s);

// The names the renderer derives (exposed for the access answer and the tests).
Result<std::string> tenant_namespace(std::string_view tenant_id);                        // "t_ab12" -> "gpuplan-tab12"
Result<std::string> rental_object_name(std::string_view rental_id, int64_t generation);  // "gpuplan-rab12-g3"
// The device plugin's resource for a profile: "nvidia.com/mig-3g.40gb", '+' read as '.' ("1g.10gb+me" ->
// "nvidia.com/mig-1g.10gb.me"); a whole GPU (empty profile): "nvidia.com/gpu". The same rule as the
// k8s export of `mig pack` (mig::kubernetes_resource).
std::string device_plugin_resource(std::string_view mig_profile);
// The DRA selector of a rental ("device.attributes['gpu.nvidia.com'].profile == '3g.40gb' && ...").
std::string dra_selector(const K8sRental& r);

// Every manifest of the rental, in apply order: Namespace, ResourceQuota, ServiceAccount, Role,
// RoleBinding, [ResourceClaim,] Pod. A user-given string that breaks Kubernetes' rules is a usage error
// naming the field; nothing is rendered then.
Result<std::vector<Manifest>> render_kubernetes(const K8sRental& rental, const K8sOptions& options);

// The manifests as one `v1` List (what `kubectl apply -f -` reads), two-space indented JSON.
std::string manifest_list_text(std::span<const Manifest> manifests);

// kubectl, when a kubeconfig is configured.
struct KubectlConfig {
  std::string kubectl = "kubectl";  // the binary (PATH lookup)
  std::string kubeconfig;           // --kubeconfig FILE; required
  std::string context;              // --context NAME; empty: the kubeconfig's current context
};
// argv of `kubectl --kubeconfig F [--context C] apply -f -` (the List on stdin). Server-side apply with
// gpuplan as the field manager, so re-applying the same names is idempotent and another manager's
// fields are a conflict, not an overwrite.
Result<std::vector<std::string>> kubectl_apply_argv(const KubectlConfig& config);
// argv that deletes the rental's Pod and claim (the namespace and the credential stay for the tenant's
// other rentals); absent objects are not an error.
Result<std::vector<std::string>> kubectl_delete_argv(const KubectlConfig& config, const K8sRental& rental,
                                                     K8sMode mode);

// Applies the manifests through `run`; a non-zero exit is kUnavailable with kubectl's error text.
Result<ProcessResult> kubectl_apply(std::span<const Manifest> manifests, const KubectlConfig& config,
                                    const ProcessRunner& run);

// --- the outbox's Kubernetes target (src/handoff/k8s_target.cc; docs/market.md, "Hand-off to Kubernetes") --
// apply: `kubectl get pod` first (found: already_existed), else the rental's manifests through
// `kubectl apply -f - -o name` (server-side: an existing object is success); status: the Pod's phase
// (Running: running; Pending, Unknown: pending; Failed, Succeeded, NotFound: gone); stop and delete:
// `kubectl delete pod[,resourceclaim] -l gpuplan.io/rental=ID,gpuplan.io/generation=G --ignore-not-found
// --wait=false`, then the tenant's ResourceQuota re-applied over its other live rentals; access: the
// namespace, the Pod, the API server of the kubeconfig and a fresh one-hour token of the namespace's
// ServiceAccount gpuplan-renter (`kubectl create token`), never stored.
struct KubernetesTargetOptions {
  KubectlConfig kubectl;  // kubeconfig required
  K8sMode mode = K8sMode::kDevicePlugin;
  ProcessRunner run;  // empty: run_process
};
std::unique_ptr<HandoffTarget> make_kubernetes_target(KubernetesTargetOptions options);
// The renderer's rental of the outbox's (a rental with no template image runs kDefaultImage).
K8sRental k8s_rental_of(const HandoffRental& r);
inline constexpr std::string_view kDefaultImage = "docker.io/library/ubuntu:24.04";  // a shell to exec into
inline constexpr std::string_view kRenterAccount = "gpuplan-renter";                 // the renter's ServiceAccount

// kubectl's answers are outside input: each is bounded and checked (fuzz/fuzz_kubectl_output.cc).
struct PodPhase {
  bool found = false;  // false: NotFound
  std::string phase;   // "Running", "Pending", ...; empty: no status yet
  ExternalState state = ExternalState::kGone;
};
inline constexpr size_t kMaxKubectlWordBytes = 256;  // a phase, a name, a URL: longer is not kubectl's answer
inline constexpr size_t kMaxTokenBytes = 16 << 10;   // a ServiceAccount JWT is 1-2 KB
// `kubectl get pod NAME -o jsonpath={.status.phase}`: exit 0 and a phase, or exit 1 and NotFound.
Result<PodPhase> parse_pod_phase(const ProcessResult& res);
// `kubectl apply -o name`: one "<kind>[.<group>]/<name>" a line; the Pod's line must be there.
Status check_applied(std::string_view out, std::string_view pod_name);
// `kubectl create token`: a JWT (three base64url parts joined by '.').
Result<std::string> parse_token(std::string_view out);
// `kubectl config view --minify -o jsonpath={.clusters[0].cluster.server}`: an https:// or http:// URL.
Result<std::string> parse_server_url(std::string_view out);

}  // namespace gpuplan::handoff

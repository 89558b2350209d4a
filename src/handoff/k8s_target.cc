// The Kubernetes hand-off target (gpuplan/k8s.h, "the outbox's Kubernetes target"): the outbox worker's
// apply, status and stop of a rental on a node with `scheduler = kubernetes`, through kubectl and the
// one process runner. Names derive from (rental id, generation) as the renderer makes them, so a
// retried apply finds its Pod and a stop deletes by the rental's labels. Every kubectl answer is read
// by the checked parsers below (fuzz/fuzz_kubectl_output.cc). docs/market.md, "Hand-off to Kubernetes".
#include <algorithm>
#include <cctype>
#include <sstream>

#include "core/text.h"
#include "gpuplan/k8s.h"

namespace gpuplan::handoff {

namespace {

constexpr size_t kMaxErrorBytes = 1000;                  // kubectl's stderr in an error message, cut
constexpr const char* kTokenDuration = "--duration=1h";  // kAccessTokenSeconds
static_assert(kAccessTokenSeconds == 3600, "kTokenDuration says one hour");
constexpr const char* kReleasedUuid = "GPU-released";  // stands for the GPU a stopped rental gave back
constexpr std::string_view kNotFound = "(NotFound)";   // "Error from server (NotFound): pods \"x\" not found"

// Printable ASCII only, for echoing an answer in a message.
std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, std::min(s.size(), kMaxErrorBytes))) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  return out;
}

Error kubectl_failed(const std::string& what, const ProcessResult& res) {
  return Error{ErrorCode::kUnavailable,
               "kubectl " + what + " exited " + std::to_string(res.exit_code) + ": " + shown(trim(res.err)), "kubectl"};
}

class KubernetesTarget final : public HandoffTarget {
 public:
  explicit KubernetesTarget(KubernetesTargetOptions o) : o_(std::move(o)) {
    o_.run = runner_or_default(std::move(o_.run));
  }
  std::string_view kind() const override { return "kubernetes"; }

  Result<HandoffResult> apply(const HandoffRental& r) override {
    const K8sRental k = k8s_rental_of(r);
    GPUPLAN_TRY(found, phase(k));
    GPUPLAN_TRY(name, rental_object_name(k.rental_id, k.generation));
    if (found.found) {
      return HandoffResult{name, found.state, true, "phase=" + found.phase};
    }
    K8sOptions ro;
    ro.mode = o_.mode;
    ro.tenant_rentals = tenant_rentals(r, k);
    if (r.image.empty()) ro.command = {"sleep", "infinity"};  // kDefaultImage holds the GPU and a shell
    GPUPLAN_TRY(manifests, render_kubernetes(k, ro));
    GPUPLAN_TRY(apply_base, kubectl_apply_argv(o_.kubectl));
    std::vector<std::string> argv = apply_base;
    argv.insert(argv.end(), {"-o", "name"});
    GPUPLAN_TRY(res, o_.run(argv, manifest_list_text(manifests)));
    if (res.exit_code != 0) return kubectl_failed("apply", res);
    GPUPLAN_CHECK(check_applied(res.out, name));
    return HandoffResult{name, ExternalState::kPending, false, "applied " + std::to_string(manifests.size())};
  }

  Result<HandoffResult> stop(const HandoffRental& r, std::string_view) override {
    K8sRental k = k8s_rental_of(r);
    // A stopped rental has released its GPU: only the names and the quota are rendered, not its Pod.
    if (k.gpu_uuid.empty()) k.gpu_uuid = kReleasedUuid;
    GPUPLAN_TRY(ns, tenant_namespace(k.tenant_id));
    GPUPLAN_TRY(name, rental_object_name(k.rental_id, k.generation));
    GPUPLAN_TRY(base, prefix());
    std::vector<std::string> argv = base;
    // A cluster without DRA does not know the claim's type at all: name it only in DRA mode.
    argv.insert(argv.end(),
                {"delete", o_.mode == K8sMode::kDra ? "pod,resourceclaim" : "pod", "-l",
                 "gpuplan.io/rental=" + k.rental_id + ",gpuplan.io/generation=" + std::to_string(k.generation), "-n",
                 ns, "--ignore-not-found", "--wait=false"});
    GPUPLAN_TRY(res, o_.run(argv, {}));
    if (res.exit_code != 0) return kubectl_failed("delete", res);
    const bool nothing = trim(res.out).empty();  // --ignore-not-found prints nothing when none matched
    // The quota over the tenant's other live rentals (its resource capped at 0 when none is left).
    K8sOptions ro;
    ro.mode = o_.mode;
    ro.count_self = false;
    ro.tenant_rentals = tenant_rentals(r, k);
    GPUPLAN_TRY(manifests, render_kubernetes(k, ro));
    std::vector<Manifest> quota;
    std::copy_if(manifests.begin(), manifests.end(), std::back_inserter(quota),
                 [](const Manifest& m) { return m.kind == "ResourceQuota"; });
    GPUPLAN_TRY(apply_base, kubectl_apply_argv(o_.kubectl));
    std::vector<std::string> apply_argv = apply_base;
    apply_argv.insert(apply_argv.end(), {"-o", "name"});
    GPUPLAN_TRY(applied, o_.run(apply_argv, manifest_list_text(quota)));
    if (applied.exit_code != 0) return kubectl_failed("apply (quota)", applied);
    return HandoffResult{name, ExternalState::kGone, nothing, nothing ? "nothing to delete" : shown(trim(res.out))};
  }

  Result<HandoffResult> status(const HandoffRental& r, std::string_view) override {
    const K8sRental k = k8s_rental_of(r);
    GPUPLAN_TRY(found, phase(k));
    GPUPLAN_TRY(name, rental_object_name(k.rental_id, k.generation));
    return HandoffResult{name, found.state, false, found.found ? "phase=" + found.phase : "no such pod"};
  }

  HandoffAccess access(const HandoffRental& r, std::string_view external_id) const override {
    HandoffAccess a;
    a.kind = "kubernetes";
    const K8sRental k = k8s_rental_of(r);
    auto ns = tenant_namespace(k.tenant_id);
    auto pod = rental_object_name(k.rental_id, k.generation);
    if (!ns || !pod) {
      a.note = "no access: " + (ns ? pod.error().message : ns.error().message);
      return a;
    }
    a.kube_namespace = *ns;
    a.pod = external_id.empty() ? *pod : std::string(external_id);
    a.external_id = a.pod;
    std::vector<std::string> notes;
    if (auto server =
            ask({"config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}"}, parse_server_url)) {
      a.server = *server;
    } else {
      notes.push_back("no API server URL: " + server.error().message);
    }
    if (auto token = ask({"create", "token", std::string(kRenterAccount), "-n", *ns, kTokenDuration}, parse_token)) {
      a.token = *token;
      a.token_expires_in_seconds = kAccessTokenSeconds;
    } else {
      notes.push_back("no token: " + token.error().message);
    }
    a.command = "kubectl" + (a.server.empty() ? std::string() : " --server=" + a.server) +
                " --token=\"$GPUPLAN_K8S_TOKEN\" -n " + a.kube_namespace + " exec -it " + a.pod + " -- sh";
    notes.push_back("export GPUPLAN_K8S_TOKEN=<token> (valid one hour, scoped to " + a.kube_namespace +
                    "; ask again for a new one); the cluster's CA comes from its provider");
    if (r.image.empty()) notes.push_back("no template image: the Pod runs " + std::string(kDefaultImage));
    for (size_t i = 0; i < notes.size(); ++i) a.note += (i == 0 ? "" : "; ") + notes[i];
    return a;
  }

 private:
  Result<std::vector<std::string>> prefix() const {
    if (o_.kubectl.kubeconfig.empty()) {
      return usage_error("no kubeconfig is configured: give serve --kubeconfig FILE", "kubeconfig");
    }
    std::vector<std::string> argv{o_.kubectl.kubectl.empty() ? "kubectl" : o_.kubectl.kubectl, "--kubeconfig",
                                  o_.kubectl.kubeconfig};
    if (!o_.kubectl.context.empty()) argv.insert(argv.end(), {"--context", o_.kubectl.context});
    return argv;
  }

  Result<PodPhase> phase(const K8sRental& k) const {
    GPUPLAN_TRY(ns, tenant_namespace(k.tenant_id));
    GPUPLAN_TRY(name, rental_object_name(k.rental_id, k.generation));
    GPUPLAN_TRY(base, prefix());
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), {"get", "pod", name, "-n", ns, "-o", "jsonpath={.status.phase}"});
    GPUPLAN_TRY(res, o_.run(argv, {}));
    return parse_pod_phase(res);
  }

  template <typename Parse>
  Result<std::string> ask(std::vector<std::string> args, Parse parse) const {
    GPUPLAN_TRY(base, prefix());
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), args.begin(), args.end());
    GPUPLAN_TRY(res, o_.run(argv, {}));
    if (res.exit_code != 0) return kubectl_failed(args[0] + " " + args[1], res);
    return parse(res.out);
  }

  static std::vector<K8sRental> tenant_rentals(const HandoffRental& r, const K8sRental& self) {
    std::vector<K8sRental> out;
    for (const TenantSlice& t : r.tenant_live) {
      if (out.size() >= kMaxTenantRentals) break;
      if (t.rental_id == self.rental_id) continue;
      K8sRental k;
      k.rental_id = t.rental_id;
      k.tenant_id = self.tenant_id;
      k.mig_profile = t.mig_profile;
      out.push_back(std::move(k));
    }
    return out;
  }

  KubernetesTargetOptions o_;
};

bool jwt_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

}  // namespace

K8sRental k8s_rental_of(const HandoffRental& r) {
  K8sRental k;
  k.rental_id = r.rental_id;
  k.generation = r.generation;
  k.tenant_id = r.tenant_id;
  k.tenant_name = r.tenant_name;
  k.node_id = r.node_id;
  k.node_name = r.node_name;
  k.gpu_uuid = r.gpu_uuid;
  k.gpu_type = r.gpu_type;
  k.mig_profile = r.mig_profile;
  k.placement_start = r.placement_start;
  k.image = r.image.empty() ? std::string(kDefaultImage) : r.image;
  return k;
}

Result<PodPhase> parse_pod_phase(const ProcessResult& res) {
  PodPhase p;
  if (res.exit_code != 0) {
    if (res.err.find(kNotFound) != std::string::npos) return p;  // found = false, gone
    return kubectl_failed("get pod", res);
  }
  const std::string phase = trim(res.out);
  p.found = true;
  p.phase = phase;
  if (phase == "Running") {
    p.state = ExternalState::kRunning;
  } else if (phase.empty() || phase == "Pending" || phase == "Unknown") {
    p.state = ExternalState::kPending;  // no status yet, or its node does not answer
  } else if (phase == "Succeeded" || phase == "Failed") {
    p.state = ExternalState::kGone;
  } else {
    return Error{ErrorCode::kUnavailable, "kubectl get pod answered '" + shown(phase) + "', not a Pod phase",
                 "kubectl"};
  }
  return p;
}

Status check_applied(std::string_view out, std::string_view pod_name) {
  std::istringstream lines{std::string(out)};
  std::string line;
  while (std::getline(lines, line)) {
    const std::string word = trim(line);
    if (word.size() > kMaxKubectlWordBytes) continue;
    // "pod/NAME" (kubectl -o name), whatever follows a space ("serverside-applied" of older releases).
    const std::string first = word.substr(0, word.find(' '));
    if (first == "pod/" + std::string(pod_name)) return Status::Ok();
  }
  return Error{ErrorCode::kUnavailable,
               "kubectl apply did not list pod/" + std::string(pod_name) + " (it answered '" + shown(trim(out)) + "')",
               "kubectl"};
}

Result<std::string> parse_token(std::string_view out) {
  const std::string t = trim(out);
  if (t.empty()) return Error{ErrorCode::kUnavailable, "kubectl create token answered nothing", "kubectl"};
  if (t.size() > kMaxTokenBytes) {
    return Error{ErrorCode::kUnavailable,
                 "kubectl create token answered over " + std::to_string(kMaxTokenBytes) + " bytes", "kubectl"};
  }
  const auto dots = std::count(t.begin(), t.end(), '.');
  const bool chars = std::all_of(t.begin(), t.end(), [](char c) { return jwt_char(c) || c == '.'; });
  if (dots != 2 || !chars || t.front() == '.' || t.back() == '.' || t.find("..") != std::string::npos) {
    return Error{ErrorCode::kUnavailable, "kubectl create token answered something that is not a token", "kubectl"};
  }
  return t;
}

Result<std::string> parse_server_url(std::string_view out) {
  const std::string u = trim(out);
  const bool scheme = u.rfind("https://", 0) == 0 || u.rfind("http://", 0) == 0;
  const bool chars = std::all_of(u.begin(), u.end(), [](char c) { return c > 0x20 && c < 0x7f && c != '"'; });
  if (!scheme || !chars || u.size() > kMaxKubectlWordBytes || u.find("://") + 3 == u.size()) {
    return Error{ErrorCode::kUnavailable, "the kubeconfig's server '" + shown(u) + "' is not an http(s) URL",
                 "kubeconfig"};
  }
  return u;
}

std::unique_ptr<HandoffTarget> make_kubernetes_target(KubernetesTargetOptions options) {
  return std::make_unique<KubernetesTarget>(std::move(options));
}

}  // namespace gpuplan::handoff

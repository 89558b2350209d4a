// Fuzzes the Kubernetes target's readers of kubectl's answers (src/handoff/k8s_target.cc): the input,
// split at its first NUL, is kubectl's stdout and stderr; its first byte's low bit the exit code. The
// parsers and the target's apply, status, stop and access run over a fake runner that answers it.
// Oracles (an abort is a libFuzzer crash):
// - nothing throws or crashes, whatever kubectl prints;
// - an accepted token is three non-empty base64url parts, at most kMaxTokenBytes;
// - an accepted server URL starts with http:// or https:// and has no space or control character;
// - an accepted apply names the Pod the renderer made.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gpuplan/k8s.h"

namespace {
namespace h = gpuplan::handoff;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string out = in.substr(0, nul);
  const std::string err = nul == std::string::npos ? "" : in.substr(nul + 1);
  const int code = size > 0 ? (data[0] & 1) : 0;
  const h::ProcessResult res{code, out, err, false};
  (void)h::parse_pod_phase(res);
  (void)h::check_applied(out, "gpuplan-rfuzz-g1");
  if (auto t = h::parse_token(out)) {
    if (t->empty() || t->size() > h::kMaxTokenBytes || t->front() == '.' || t->back() == '.' ||
        t->find("..") != std::string::npos) {
      std::abort();
    }
  }
  if (auto u = h::parse_server_url(out)) {
    if (u->rfind("http", 0) != 0) std::abort();
    for (char c : *u) {
      if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) std::abort();
    }
  }
  h::KubernetesTargetOptions o;
  o.kubectl.kubeconfig = "/fuzz/kubeconfig";
  o.run = [&](const std::vector<std::string>&, const std::string&) -> gpuplan::Result<h::ProcessResult> { return res; };
  auto t = h::make_kubernetes_target(o);
  h::HandoffRental r;
  r.rental_id = "r_fuzz";
  r.generation = 1;
  r.tenant_id = "t_fuzz";
  r.node_id = "n_fuzz";
  r.node_name = "node-1";
  r.gpu_uuid = "GPU-fuzz";
  r.mig_profile = "3g.40gb";
  auto applied = t->apply(r);
  if (applied && applied->external_id != "gpuplan-rfuzz-g1") std::abort();
  (void)t->status(r, "");
  (void)t->stop(r, "");
  (void)t->access(r, "");
  return 0;
}

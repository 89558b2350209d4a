// Fuzzes the Kubernetes renderer (gpuplan/k8s.h): the input as a rental in JSON (the hand-off row, or
// `gpuplan k8s render --rental-json`) -> k8s_rental_from_json -> render_kubernetes in both modes. Oracles
// (an abort is a libFuzzer crash): an accepted rendering has 6 (device plugin) or 7 (DRA) manifests; every
// name and namespace is a DNS-1123 label; each manifest's text parses back to its object; the Pod's image
// and node are the input's, and the List text parses with every item in it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gpuplan/k8s.h"

namespace {
namespace h = gpuplan::handoff;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const gpuplan::Json j = gpuplan::Json::parse(text, nullptr, false);
  if (j.is_discarded()) return 0;
  auto rental = h::k8s_rental_from_json(j);
  if (!rental.ok()) return 0;
  for (h::K8sMode mode : {h::K8sMode::kDevicePlugin, h::K8sMode::kDra}) {
    h::K8sOptions o;
    o.mode = mode;
    auto m = h::render_kubernetes(*rental, o);
    if (!m.ok()) continue;
    if (m->size() != (mode == h::K8sMode::kDra ? 7u : 6u)) std::abort();
    for (const h::Manifest& x : *m) {
      if (!h::is_dns1123_label(x.name) && x.kind != "Namespace") std::abort();
      if (!x.ns.empty() && !h::is_dns1123_label(x.ns)) std::abort();
      if (gpuplan::Json::parse(x.text, nullptr, false) != x.object) std::abort();
    }
    const gpuplan::Json& pod = m->back().object;
    if (pod["spec"]["containers"][0]["image"] != rental->image) std::abort();
    if (pod["spec"]["nodeSelector"]["kubernetes.io/hostname"] != rental->node_name) std::abort();
    const gpuplan::Json list = gpuplan::Json::parse(h::manifest_list_text(*m), nullptr, false);
    if (list.is_discarded() || list["items"].size() != m->size()) std::abort();
  }
  return 0;
}

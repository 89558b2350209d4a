// The Kubernetes renderer (gpuplan/k8s.h): names and strings checked against Kubernetes' rules first,
// then the manifests built as JSON objects (no text is pasted into a document: the JSON writer escapes).
#include "gpuplan/k8s.h"

#include <algorithm>
#include <map>

namespace gpuplan::handoff {

namespace {

// Labels every object carries (the gpuplan.io prefix is ours; app.kubernetes.io/managed-by is the
// recommended label of kubernetes.io/docs/concepts/overview/working-with-objects/common-labels).
constexpr std::string_view kLabelRental = "gpuplan.io/rental";
constexpr std::string_view kLabelGeneration = "gpuplan.io/generation";
constexpr std::string_view kLabelTenant = "gpuplan.io/tenant";
constexpr std::string_view kLabelNode = "gpuplan.io/node";
constexpr std::string_view kLabelManagedBy = "app.kubernetes.io/managed-by";
constexpr std::string_view kAnnotationTenantName = "gpuplan.io/tenant-name";
constexpr std::string_view kNamespacePrefix = "gpuplan-t";  // issue #15: a namespace per tenant, gpuplan-t<id>
constexpr std::string_view kObjectPrefix = "gpuplan-r";
constexpr std::string_view kRenterName = "gpuplan-renter";  // the ServiceAccount, Role and RoleBinding
constexpr std::string_view kQuotaName = "gpuplan-quota";
constexpr std::string_view kClaimRequest = "gpu";  // the ResourceClaim's request and the Pod's claim entry
constexpr std::string_view kContainerName = "main";
constexpr std::string_view kHostnameLabel = "kubernetes.io/hostname";  // well-known label kubelet sets
// NVIDIA's GPU nodes carry this taint when the GPU Operator is told to taint them; tolerating it is harmless.
constexpr std::string_view kGpuTaint = "nvidia.com/gpu";
// NVIDIA DRA driver (k8s-dra-driver-gpu): the driver name that qualifies its attributes, and its classes.
constexpr std::string_view kDraDriver = "gpu.nvidia.com";
constexpr std::string_view kDraMigClass = "mig.nvidia.com";
constexpr std::string_view kDraGpuClass = "gpu.nvidia.com";
// ResourceQuota of DRA devices: <class>.deviceclass.resource.k8s.io/devices (KEP-4381, Kubernetes >= 1.32).
constexpr std::string_view kDraQuotaSuffix = ".deviceclass.resource.k8s.io/devices";
constexpr size_t kMaxIdBytes = 64;                     // market ids are a prefix and 20 hex digits
constexpr int64_t kMaxGeneration = 1'000'000'000'000;  // far above any rental's version count
constexpr int kMaxPlacementStart = 63;                 // memory slices of a GPU (8 on A100/H100)
constexpr size_t kMaxUuidBytes = 96;                   // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr size_t kMaxProfileBytes = 32;                // "7g.141gb+gfx" is 12

bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool alnum(char c) { return lower_alnum(c) || (c >= 'A' && c <= 'Z'); }

// The id's characters after its market prefix ("t_", "r_"), lower-cased, '_' read as '-'.
Result<std::string> id_part(std::string_view id, std::string_view prefix, const std::string& field) {
  if (id.empty()) return usage_error(field + " is required", field);
  if (id.size() > kMaxIdBytes) return limit_error(field + " is over " + std::to_string(kMaxIdBytes) + " bytes", field);
  if (id.substr(0, prefix.size()) == prefix) id.remove_prefix(prefix.size());
  std::string out;
  for (char c : id) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c == '_') c = '-';
    if (!lower_alnum(c) && c != '-') {
      return usage_error(field + " '" + std::string(id) + "' may hold letters, digits, '-' and '_' only", field);
    }
    out += c;
  }
  if (out.empty() || !lower_alnum(out.front()) || !lower_alnum(out.back())) {
    return usage_error(field + " must start and end with a letter or digit after its prefix", field);
  }
  return out;
}

bool is_uuid(std::string_view s) {
  if (s.empty() || s.size() > kMaxUuidBytes) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return alnum(c) || c == '-'; });
}

// "3g.40gb", "1g.10gb+me", "7g.141gb+gfx": digits, letters, '.' and '+', starting with a digit.
bool is_profile(std::string_view s) {
  if (s.empty() || s.size() > kMaxProfileBytes || !(s.front() >= '0' && s.front() <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return lower_alnum(c) || c == '.' || c == '+'; });
}

Status check_rental(const K8sRental& r) {
  GPUPLAN_CHECK(id_part(r.rental_id, "r_", "rental_id"));
  GPUPLAN_CHECK(id_part(r.tenant_id, "t_", "tenant_id"));
  if (!is_label_value(r.rental_id) || !is_label_value(r.tenant_id)) {
    return usage_error("rental_id and tenant_id must be Kubernetes label values (at most 63 of [A-Za-z0-9-_.])",
                       "rental_id");
  }
  if (r.generation < 0 || r.generation > kMaxGeneration) {
    return usage_error("generation must be in [0, " + std::to_string(kMaxGeneration) + "]", "generation");
  }
  if (!is_label_value(r.node_id)) {
    return usage_error("node_id '" + r.node_id + "' is not a Kubernetes label value (at most 63 of [A-Za-z0-9-_.])",
                       "node_id");
  }
  if (!is_dns1123_subdomain(r.node_name)) {
    return usage_error("node_name '" + r.node_name +
                           "' is not a Kubernetes node name (lower-case RFC 1123 subdomain, at most 253 bytes); "
                           "give the name `kubectl get nodes` lists",
                       "node_name");
  }
  if (!is_uuid(r.gpu_uuid)) {
    return usage_error("gpu_uuid '" + r.gpu_uuid + "' is not an NVML UUID (GPU-..., letters, digits and '-')",
                       "gpu_uuid");
  }
  if (!r.mig_profile.empty() && !is_profile(r.mig_profile)) {
    return usage_error("mig_profile '" + r.mig_profile + "' is not a MIG profile name like 3g.40gb", "mig_profile");
  }
  if (r.placement_start < 0 || r.placement_start > kMaxPlacementStart) {
    return usage_error("placement_start must be in [0, " + std::to_string(kMaxPlacementStart) + "]", "placement_start");
  }
  if (r.image.size() > kMaxImageBytes) {
    return limit_error("image is over " + std::to_string(kMaxImageBytes) + " bytes", "image");
  }
  if (!is_image_reference(r.image)) {
    return usage_error("image '" + r.image +
                           "' is not a container image reference ([host[:port]/]name[:tag][@sha256:digest], "
                           "lower-case name)",
                       "image");
  }
  if (r.tenant_name.size() > kMaxTenantNameBytes) {
    return limit_error("tenant_name is over " + std::to_string(kMaxTenantNameBytes) + " bytes", "tenant_name");
  }
  for (unsigned char c : r.tenant_name) {
    if (c < 0x20 || c == 0x7f) return usage_error("tenant_name holds a control character", "tenant_name");
  }
  return Status::Ok();
}

Status check_utf8(const std::string& s, const std::string& field) {
  try {
    (void)Json(s).dump(-1, ' ', false, Json::error_handler_t::strict);
  } catch (const Json::exception&) {
    return usage_error(field + " is not valid UTF-8", field);
  }
  return Status::Ok();
}

Json labels_of(const K8sRental& r, const std::string& tenant, bool with_rental) {
  Json l = Json::object();
  l[std::string(kLabelManagedBy)] = "gpuplan";
  l[std::string(kLabelTenant)] = tenant;
  if (with_rental) {
    l[std::string(kLabelRental)] = r.rental_id;  // checked: a market id is a label value
    l[std::string(kLabelGeneration)] = std::to_string(r.generation);
    l[std::string(kLabelNode)] = r.node_id;
  }
  return l;
}

Json metadata(const std::string& name, const std::string& ns, Json labels) {
  Json m = Json::object();
  m["name"] = name;
  if (!ns.empty()) m["namespace"] = ns;
  m["labels"] = std::move(labels);
  return m;
}

Manifest make(std::string kind, std::string name, std::string ns, Json object) {
  Manifest m{std::move(kind), std::move(name), std::move(ns), std::move(object), {}};
  m.text = m.object.dump(2) + "\n";
  return m;
}

std::string quote_cel(std::string_view s) { return "'" + std::string(s) + "'"; }  // s is checked: no quote

// What one rental counts in the tenant's quota: {resource name, 1}.
std::string quota_key(const K8sRental& r, K8sMode mode) {
  if (mode == K8sMode::kDevicePlugin) return "requests." + device_plugin_resource(r.mig_profile);
  return std::string(r.mig_profile.empty() ? kDraGpuClass : kDraMigClass) + std::string(kDraQuotaSuffix);
}

}  // namespace

Result<K8sRental> k8s_rental_from_json(const Json& j) {
  if (!j.is_object()) return usage_error("a rental is a JSON object", "rental");
  K8sRental r;
  const std::pair<const char*, std::string*> texts[] = {{"rental_id", &r.rental_id},
                                                        {"tenant_id", &r.tenant_id},
                                                        {"tenant_name", &r.tenant_name},
                                                        {"node_id", &r.node_id},
                                                        {"node_name", &r.node_name},
                                                        {"gpu_uuid", &r.gpu_uuid},
                                                        {"gpu_type", &r.gpu_type},
                                                        {"mig_profile", &r.mig_profile},
                                                        {"image", &r.image},
                                                        {"slurm_gres_type", &r.slurm_gres_type}};
  for (const auto& item : j.items()) {
    const std::string& key = item.key();
    const Json& value = item.value();
    const auto* t = std::find_if(std::begin(texts), std::end(texts), [&](const auto& e) { return key == e.first; });
    if (t != std::end(texts)) {
      if (value.is_null()) continue;  // mig_profile: null for a whole GPU
      if (!value.is_string()) return usage_error(key + " must be a string", key);
      *t->second = value.get<std::string>();
    } else if (key == "generation" || key == "placement_start") {
      if (value.is_null() && key == "placement_start") continue;
      if (!value.is_number_integer()) return usage_error(key + " must be an integer", key);
      const int64_t v = value.get<int64_t>();
      if (key == "generation") {
        r.generation = v;
      } else {
        if (v < 0 || v > kMaxPlacementStart) {
          return usage_error("placement_start must be in [0, " + std::to_string(kMaxPlacementStart) + "]", key);
        }
        r.placement_start = static_cast<int>(v);
      }
    } else {
      return usage_error(
          "unknown key '" + key +
              "' in the rental (keys: rental_id, generation, tenant_id, "
              "tenant_name, node_id, node_name, gpu_uuid, gpu_type, mig_profile, placement_start, image, "
              "slurm_gres_type)",
          key);
    }
  }
  return r;
}

std::string_view to_string(K8sMode mode) { return mode == K8sMode::kDra ? "dra" : "device-plugin"; }

Result<K8sMode> parse_k8s_mode(std::string_view word) {
  if (word == "device-plugin" || word == "device_plugin") return K8sMode::kDevicePlugin;
  if (word == "dra") return K8sMode::kDra;
  return usage_error("mode is device-plugin or dra, not '" + std::string(word) + "'", "mode");
}

bool is_dns1123_label(std::string_view s) {
  if (s.empty() || s.size() > kMaxDnsLabelBytes) return false;
  if (!lower_alnum(s.front()) || !lower_alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return lower_alnum(c) || c == '-'; });
}

bool is_dns1123_subdomain(std::string_view s) {
  if (s.empty() || s.size() > kMaxDnsSubdomainBytes) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    const std::string_view part = s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (!is_dns1123_label(part)) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool is_label_value(std::string_view s) {
  if (s.empty()) return true;
  if (s.size() > kMaxDnsLabelBytes || !alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// The distribution reference grammar (github.com/distribution/reference, regexp.go), written out:
//   reference := name [ ":" tag ] [ "@" digest ]
//   name      := [domain "/"] path-component ("/" path-component)*
//   domain    := host [":" port], host a DNS name (letters, digits, '-', '.'), or "localhost"
//   path-component := [a-z0-9]+ (separator [a-z0-9]+)*, separator := "." | "_" | "__" | "-"+
//   tag       := [\w][\w.-]{0,127}
//   digest    := algorithm ":" hex (at least 32 hex digits)
bool is_image_reference(std::string_view s) {
  if (s.empty() || s.size() > kMaxImageBytes) return false;
  std::string_view rest = s;
  std::string_view digest;
  if (const size_t at = rest.find('@'); at != std::string_view::npos) {
    digest = rest.substr(at + 1);
    rest = rest.substr(0, at);
    const size_t colon = digest.find(':');
    if (colon == std::string_view::npos || colon == 0) return false;
    const std::string_view algo = digest.substr(0, colon), hex = digest.substr(colon + 1);
    constexpr size_t kMinDigestHex = 32;  // the grammar's minimum
    if (hex.size() < kMinDigestHex) return false;
    if (!std::all_of(algo.begin(), algo.end(),
                     [](char c) { return lower_alnum(c) || c == '+' || c == '.' || c == '_' || c == '-'; }))
      return false;
    if (!std::all_of(hex.begin(), hex.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }))
      return false;
  }
  // The tag: after the last ':' that follows the last '/'.
  const size_t slash = rest.rfind('/');
  const size_t colon = rest.rfind(':');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    const std::string_view tag = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
    constexpr size_t kMaxTagBytes = 128;
    if (tag.empty() || tag.size() > kMaxTagBytes) return false;
    auto word = [](char c) { return alnum(c) || c == '_'; };
    if (!word(tag.front())) return false;
    if (!std::all_of(tag.begin(), tag.end(), [&](char c) { return word(c) || c == '.' || c == '-'; })) return false;
  }
  if (rest.empty()) return false;
  // Split into components; the first is a domain when it has '.', ':' or is "localhost" and more follow.
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t next = rest.find('/', start);
    parts.push_back(rest.substr(start, next == std::string_view::npos ? std::string_view::npos : next - start));
    if (next == std::string_view::npos) break;
    start = next + 1;
  }
  // The first component is a domain when it looks like one ('.', ':' or "localhost") and parses as one;
  // otherwise it is a path component ("a.b__c/d"), as the grammar's optional domain group backtracks.
  auto is_domain = [](std::string_view host) {
    if (const size_t c = host.find(':'); c != std::string_view::npos) {
      const std::string_view port = host.substr(c + 1);
      host = host.substr(0, c);
      constexpr size_t kMaxPortDigits = 5;
      if (port.empty() || port.size() > kMaxPortDigits ||
          !std::all_of(port.begin(), port.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
        return false;
      }
    }
    if (host.empty() || !alnum(host.front()) || !alnum(host.back())) return false;
    if (host.find("..") != std::string_view::npos) return false;
    return std::all_of(host.begin(), host.end(), [](char ch) { return alnum(ch) || ch == '-' || ch == '.'; });
  };
  size_t first = 0;
  if (parts.size() > 1 && (parts[0].find_first_of(".:") != std::string_view::npos || parts[0] == "localhost") &&
      is_domain(parts[0])) {
    first = 1;
  }
  for (size_t i = first; i < parts.size(); ++i) {
    const std::string_view p = parts[i];
    if (p.empty() || !lower_alnum(p.front()) || !lower_alnum(p.back())) return false;
    for (size_t k = 0; k < p.size(); ++k) {
      const char c = p[k];
      if (lower_alnum(c)) continue;
      if (c == '-') continue;  // "-"+ between alphanumerics
      if (c == '.' || c == '_') {
        // "." and "_" stand alone, "__" is allowed; never next to another separator otherwise
        const char next = p[k + 1];  // p.back() is alphanumeric, so k + 1 < size
        if (c == '_' && next == '_') {
          ++k;
          if (!lower_alnum(p[k + 1])) return false;
          continue;
        }
        if (!lower_alnum(next)) return false;
        continue;
      }
      return false;
    }
  }
  return true;
}

Result<std::string> tenant_namespace(std::string_view tenant_id) {
  GPUPLAN_TRY(part, id_part(tenant_id, "t_", "tenant_id"));
  std::string ns = std::string(kNamespacePrefix) + part;
  if (!is_dns1123_label(ns))
    return usage_error("tenant_id makes the namespace '" + ns + "', over 63 bytes", "tenant_id");
  return ns;
}

Result<std::string> rental_object_name(std::string_view rental_id, int64_t generation) {
  GPUPLAN_TRY(part, id_part(rental_id, "r_", "rental_id"));
  std::string name = std::string(kObjectPrefix) + part + "-g" + std::to_string(generation);
  if (!is_dns1123_label(name)) {
    return usage_error("rental_id makes the name '" + name + "', over 63 bytes", "rental_id");
  }
  return name;
}

std::string device_plugin_resource(std::string_view mig_profile) {
  if (mig_profile.empty()) return "nvidia.com/gpu";
  std::string name = "nvidia.com/mig-" + std::string(mig_profile);
  std::replace(name.begin(), name.end(), '+', '.');
  return name;
}

std::string dra_selector(const K8sRental& r) {
  const std::string attrs = "device.attributes['" + std::string(kDraDriver) + "']";
  if (r.mig_profile.empty()) return attrs + ".uuid == " + quote_cel(r.gpu_uuid);
  return attrs + ".profile == " + quote_cel(r.mig_profile) + " && " + attrs +
         ".parentUUID == " + quote_cel(r.gpu_uuid) + " && " +
         quote_cel("memorySlice" + std::to_string(r.placement_start)) + " in device.capacity['" +
         std::string(kDraDriver) + "']";
}

Result<std::vector<Manifest>> render_kubernetes(const K8sRental& r, const K8sOptions& o) {
  GPUPLAN_CHECK(check_rental(r));
  GPUPLAN_CHECK(check_utf8(r.tenant_name, "tenant_name"));
  if (o.command.size() > kMaxCommandItems) {
    return limit_error("command has over " + std::to_string(kMaxCommandItems) + " words", "command");
  }
  for (const std::string& w : o.command) {
    if (w.size() > kMaxCommandItemBytes) {
      return limit_error("a command word is over " + std::to_string(kMaxCommandItemBytes) + " bytes", "command");
    }
    GPUPLAN_CHECK(check_utf8(w, "command"));
  }
  if (o.tenant_rentals.size() > kMaxTenantRentals) {
    return limit_error("tenant_rentals has over " + std::to_string(kMaxTenantRentals) + " rentals", "tenant_rentals");
  }
  GPUPLAN_TRY(ns, tenant_namespace(r.tenant_id));
  GPUPLAN_TRY(name, rental_object_name(r.rental_id, r.generation));
  const std::string& tenant_label = r.tenant_id;  // checked: a label value

  // The quota counts every live rental of the tenant (one quota per namespace), this one at least.
  std::map<std::string, int64_t> hard;
  bool self_counted = false;
  for (const K8sRental& t : o.tenant_rentals) {
    if (t.tenant_id != r.tenant_id) {
      return usage_error("tenant_rentals holds rental " + t.rental_id + " of another tenant", "tenant_rentals");
    }
    if (!t.mig_profile.empty() && !is_profile(t.mig_profile)) {
      return usage_error("tenant_rentals: mig_profile '" + t.mig_profile + "' is not a MIG profile name",
                         "tenant_rentals");
    }
    ++hard[quota_key(t, o.mode)];
    self_counted = self_counted || t.rental_id == r.rental_id;
  }
  if (!self_counted && o.count_self) ++hard[quota_key(r, o.mode)];
  if (!o.count_self) hard.try_emplace(quota_key(r, o.mode), 0);  // its resource stays capped, at 0 if none left

  std::vector<Manifest> out;
  {
    Json meta = metadata(ns, "", labels_of(r, tenant_label, false));
    meta["annotations"] = Json{{std::string(kAnnotationTenantName), r.tenant_name}};
    out.push_back(make("Namespace", ns, "", Json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", meta}}));
  }
  {
    Json h = Json::object();
    for (const auto& [key, n] : hard) h[key] = std::to_string(n);
    out.push_back(make("ResourceQuota", std::string(kQuotaName), ns,
                       Json{{"apiVersion", "v1"},
                            {"kind", "ResourceQuota"},
                            {"metadata", metadata(std::string(kQuotaName), ns, labels_of(r, tenant_label, false))},
                            {"spec", Json{{"hard", h}}}}));
  }
  const std::string renter(kRenterName);
  out.push_back(make("ServiceAccount", renter, ns,
                     Json{{"apiVersion", "v1"},
                          {"kind", "ServiceAccount"},
                          {"metadata", metadata(renter, ns, labels_of(r, tenant_label, false))},
                          {"automountServiceAccountToken", false}}));
  {
    // The renter may see and use its Pods (logs, exec, port-forward) and see its claims and quota; it may
    // not create Pods (the GPU goes only to the Pod gpuplan renders) nor touch RBAC.
    Json rules = Json::array();
    rules.push_back(Json{{"apiGroups", Json::array({""})},
                         {"resources", Json::array({"pods", "pods/log", "events", "resourcequotas"})},
                         {"verbs", Json::array({"get", "list", "watch"})}});
    rules.push_back(Json{{"apiGroups", Json::array({""})},
                         {"resources", Json::array({"pods/exec", "pods/attach", "pods/portforward"})},
                         {"verbs", Json::array({"get", "create"})}});
    rules.push_back(Json{{"apiGroups", Json::array({"resource.k8s.io"})},
                         {"resources", Json::array({"resourceclaims"})},
                         {"verbs", Json::array({"get", "list", "watch"})}});
    out.push_back(make("Role", renter, ns,
                       Json{{"apiVersion", "rbac.authorization.k8s.io/v1"},
                            {"kind", "Role"},
                            {"metadata", metadata(renter, ns, labels_of(r, tenant_label, false))},
                            {"rules", rules}}));
    out.push_back(
        make("RoleBinding", renter, ns,
             Json{{"apiVersion", "rbac.authorization.k8s.io/v1"},
                  {"kind", "RoleBinding"},
                  {"metadata", metadata(renter, ns, labels_of(r, tenant_label, false))},
                  {"subjects", Json::array({Json{{"kind", "ServiceAccount"}, {"name", renter}, {"namespace", ns}}})},
                  {"roleRef", Json{{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", renter}}}}));
  }
  const Json rental_labels = labels_of(r, tenant_label, true);
  Json container{{"name", std::string(kContainerName)}, {"image", r.image}};
  if (!o.command.empty()) container["command"] = o.command;
  Json pod_spec = Json::object();
  if (o.mode == K8sMode::kDra) {
    Json request{{"name", std::string(kClaimRequest)},
                 {"exactly", Json{{"deviceClassName", std::string(r.mig_profile.empty() ? kDraGpuClass : kDraMigClass)},
                                  {"allocationMode", "ExactCount"},
                                  {"count", 1},
                                  {"selectors", Json::array({Json{{"cel", Json{{"expression", dra_selector(r)}}}}})}}}};
    out.push_back(make("ResourceClaim", name, ns,
                       Json{{"apiVersion", "resource.k8s.io/v1"},
                            {"kind", "ResourceClaim"},
                            {"metadata", metadata(name, ns, rental_labels)},
                            {"spec", Json{{"devices", Json{{"requests", Json::array({request})}}}}}}));
    container["resources"] = Json{{"claims", Json::array({Json{{"name", std::string(kClaimRequest)}}})}};
    pod_spec["resourceClaims"] = Json::array({Json{{"name", std::string(kClaimRequest)}, {"resourceClaimName", name}}});
  } else {
    // Extended resources are asked for in limits (requests default to them and may not differ).
    container["resources"] = Json{{"limits", Json{{device_plugin_resource(r.mig_profile), "1"}}}};
  }
  pod_spec["nodeSelector"] = Json{{std::string(kHostnameLabel), r.node_name}};
  pod_spec["serviceAccountName"] = renter;
  pod_spec["automountServiceAccountToken"] = false;
  pod_spec["restartPolicy"] = "Always";
  pod_spec["tolerations"] =
      Json::array({Json{{"key", std::string(kGpuTaint)}, {"operator", "Exists"}, {"effect", "NoSchedule"}}});
  pod_spec["containers"] = Json::array({container});
  out.push_back(make(
      "Pod", name, ns,
      Json{
          {"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", metadata(name, ns, rental_labels)}, {"spec", pod_spec}}));
  return out;
}

std::string manifest_list_text(std::span<const Manifest> manifests) {
  Json items = Json::array();
  for (const Manifest& m : manifests) items.push_back(m.object);
  return Json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", items}}.dump(2) + "\n";
}

namespace {
Result<std::vector<std::string>> kubectl_prefix(const KubectlConfig& c) {
  if (c.kubeconfig.empty()) return usage_error("no kubeconfig is configured: give --kubeconfig FILE", "kubeconfig");
  if (c.kubectl.empty()) return usage_error("kubectl is empty", "kubectl");
  std::vector<std::string> argv{c.kubectl, "--kubeconfig", c.kubeconfig};
  if (!c.context.empty()) {
    argv.emplace_back("--context");
    argv.push_back(c.context);
  }
  return argv;
}
}  // namespace

Result<std::vector<std::string>> kubectl_apply_argv(const KubectlConfig& c) {
  GPUPLAN_TRY(prefix, kubectl_prefix(c));
  std::vector<std::string> argv = prefix;
  for (const char* a : {"apply", "--server-side", "--field-manager=gpuplan", "-f", "-"}) argv.emplace_back(a);
  return argv;
}

Result<std::vector<std::string>> kubectl_delete_argv(const KubectlConfig& c, const K8sRental& r, K8sMode mode) {
  GPUPLAN_TRY(prefix, kubectl_prefix(c));
  std::vector<std::string> argv = prefix;
  GPUPLAN_TRY(ns, tenant_namespace(r.tenant_id));
  GPUPLAN_TRY(name, rental_object_name(r.rental_id, r.generation));
  for (std::string a :
       {std::string("--namespace"), ns, std::string("delete"), std::string("--ignore-not-found"), "pod/" + name}) {
    argv.push_back(std::move(a));
  }
  // A cluster without DRA does not know the resource type at all: name the claim only in DRA mode.
  if (mode == K8sMode::kDra) argv.push_back("resourceclaim.resource.k8s.io/" + name);
  return argv;
}

Result<ProcessResult> kubectl_apply(std::span<const Manifest> manifests, const KubectlConfig& config,
                                    const ProcessRunner& run) {
  GPUPLAN_TRY(argv, kubectl_apply_argv(config));
  if (!run) return Error{ErrorCode::kInternal, "no process runner", "kubectl"};
  GPUPLAN_TRY(res, run(argv, manifest_list_text(manifests)));
  if (res.exit_code != 0) {
    constexpr size_t kMaxErrorBytes = 2000;  // kubectl's message, cut
    return Error{ErrorCode::kUnavailable,
                 "kubectl apply exited " + std::to_string(res.exit_code) + ": " + res.err.substr(0, kMaxErrorBytes),
                 "kubectl"};
  }
  return res;
}

}  // namespace gpuplan::handoff

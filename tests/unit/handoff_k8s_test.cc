// The Kubernetes hand-off (gpuplan/k8s.h): goldens of the rendered manifests (tests/data/k8s/golden/,
// checked against the Kubernetes API schemas by tests/k8s/validate_manifests.py, ctest k8s_*), the
// names, the checks of every user-given string, and the kubectl command line.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "gpuplan/k8s.h"
#include "gpuplan/mig_pack.h"

namespace gpuplan::handoff {
namespace {

K8sRental mig_rental() {
  K8sRental r;
  r.rental_id = "r_0a1b2c3d4e5f60718293";
  r.generation = 3;
  r.tenant_id = "t_9f8e7d6c5b4a39281706";
  r.tenant_name = "Acme \"Research\" Lab";
  r.node_id = "n_1122334455667788aabb";
  r.node_name = "gpu-node-07.cluster.local";
  r.gpu_uuid = "GPU-5c3f2e1a-7b6d-4c8e-9f0a-1b2c3d4e5f60";
  r.gpu_type = "a100-80gb-sxm4";
  r.mig_profile = "3g.40gb";
  r.placement_start = 4;
  r.image = "nvcr.io/nvidia/pytorch:24.05-py3";
  return r;
}
K8sRental gpu_rental() {
  K8sRental r = mig_rental();
  r.rental_id = "r_ffeeddccbbaa99887766";
  r.generation = 1;
  r.mig_profile.clear();
  r.placement_start = 0;
  r.image = "ghcr.io/acme/trainer@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  return r;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The rendering of `r` against its golden file (GPUPLAN_UPDATE_GOLDEN=1 rewrites it).
void expect_golden(const std::string& name, const K8sRental& r, const K8sOptions& o) {
  auto m = render_kubernetes(r, o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const std::string text = manifest_list_text(*m);
  const std::string path = std::string(GPUPLAN_SOURCE_DIR) + "/tests/data/k8s/golden/" + name + ".json";
  if (const char* u = std::getenv("GPUPLAN_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    std::ofstream(path, std::ios::binary) << text;
    return;
  }
  EXPECT_EQ(text, read_text(path)) << "the rendering changed: GPUPLAN_UPDATE_GOLDEN=1 ./build/tests/gpuplan_tests "
                                      "--gtest_filter='K8s.*' rewrites "
                                   << path << " (then run tests/k8s/validate_manifests.py on it)";
}

TEST(K8s, GoldenDevicePluginMig) { expect_golden("device_plugin_mig", mig_rental(), K8sOptions{}); }
TEST(K8s, GoldenDevicePluginWholeGpu) {
  K8sOptions o;
  o.command = {"sleep", "infinity"};
  expect_golden("device_plugin_gpu", gpu_rental(), o);
}
TEST(K8s, GoldenDraMig) {
  K8sOptions o;
  o.mode = K8sMode::kDra;
  expect_golden("dra_mig", mig_rental(), o);
}
TEST(K8s, GoldenDraWholeGpu) {
  K8sOptions o;
  o.mode = K8sMode::kDra;
  expect_golden("dra_gpu", gpu_rental(), o);
}

TEST(K8s, ManifestsInApplyOrderWithDerivedNames) {
  K8sOptions o;
  o.mode = K8sMode::kDra;
  auto m = render_kubernetes(mig_rental(), o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  std::vector<std::string> kinds;
  for (const Manifest& x : *m) kinds.push_back(x.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"Namespace", "ResourceQuota", "ServiceAccount", "Role", "RoleBinding",
                                             "ResourceClaim", "Pod"}));
  const Manifest& pod = m->back();
  EXPECT_EQ(pod.name, "gpuplan-r0a1b2c3d4e5f60718293-g3");
  EXPECT_EQ(pod.ns, "gpuplan-t9f8e7d6c5b4a39281706");
  EXPECT_EQ(pod.object["metadata"]["labels"]["gpuplan.io/rental"], "r_0a1b2c3d4e5f60718293");
  EXPECT_EQ(pod.object["metadata"]["labels"]["gpuplan.io/generation"], "3");
  EXPECT_EQ(pod.object["metadata"]["labels"]["gpuplan.io/tenant"], "t_9f8e7d6c5b4a39281706");
  EXPECT_EQ(pod.object["spec"]["nodeSelector"]["kubernetes.io/hostname"], "gpu-node-07.cluster.local");
  EXPECT_EQ(pod.object["spec"]["resourceClaims"][0]["resourceClaimName"], pod.name);
  EXPECT_EQ(pod.object["spec"]["containers"][0]["image"], "nvcr.io/nvidia/pytorch:24.05-py3");
  // A new generation is a new Pod and claim; the tenant's namespace and credential keep their names.
  K8sRental next = mig_rental();
  next.generation = 4;
  auto m2 = render_kubernetes(next, o);
  ASSERT_TRUE(m2.ok());
  EXPECT_EQ(m2->back().name, "gpuplan-r0a1b2c3d4e5f60718293-g4");
  EXPECT_EQ((*m2)[0].name, (*m)[0].name);
  EXPECT_EQ((*m2)[2].name, (*m)[2].name);
  // The same rendering twice is byte-identical (kubectl apply of it is a no-op).
  auto again = render_kubernetes(mig_rental(), o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(manifest_list_text(*again), manifest_list_text(*m));
}

TEST(K8s, DraSelectorNamesProfileParentAndPlacement) {
  EXPECT_EQ(dra_selector(mig_rental()),
            "device.attributes['gpu.nvidia.com'].profile == '3g.40gb' && "
            "device.attributes['gpu.nvidia.com'].parentUUID == 'GPU-5c3f2e1a-7b6d-4c8e-9f0a-1b2c3d4e5f60' && "
            "'memorySlice4' in device.capacity['gpu.nvidia.com']");
  EXPECT_EQ(dra_selector(gpu_rental()),
            "device.attributes['gpu.nvidia.com'].uuid == 'GPU-5c3f2e1a-7b6d-4c8e-9f0a-1b2c3d4e5f60'");
}

TEST(K8s, DevicePluginResourceIsTheMigExportsName) {
  for (const char* p : {"1g.10gb", "3g.40gb", "1g.10gb+me", "7g.80gb", "1g.24gb+gfx"}) {
    EXPECT_EQ(device_plugin_resource(p), mig::kubernetes_resource(p)) << p;
  }
  EXPECT_EQ(device_plugin_resource(""), "nvidia.com/gpu");
}

TEST(K8s, QuotaCountsTheTenantsRentals) {
  K8sRental a = mig_rental();
  K8sRental b = mig_rental();
  b.rental_id = "r_000000000000000000b2";
  K8sRental c = gpu_rental();
  K8sOptions o;
  o.tenant_rentals = {a, b, c};
  auto m = render_kubernetes(a, o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const Json& hard = (*m)[1].object["spec"]["hard"];
  EXPECT_EQ(hard["requests.nvidia.com/mig-3g.40gb"], "2");
  EXPECT_EQ(hard["requests.nvidia.com/gpu"], "1");
  o.mode = K8sMode::kDra;
  m = render_kubernetes(a, o);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)[1].object["spec"]["hard"]["mig.nvidia.com.deviceclass.resource.k8s.io/devices"], "2");
  EXPECT_EQ((*m)[1].object["spec"]["hard"]["gpu.nvidia.com.deviceclass.resource.k8s.io/devices"], "1");
  K8sRental other = gpu_rental();
  other.tenant_id = "t_other";
  o.tenant_rentals.push_back(other);
  m = render_kubernetes(a, o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().field, "tenant_rentals");
}

TEST(K8s, UserStringsAreCheckedBeforeRendering) {
  struct Case {
    std::string field;
    std::function<void(K8sRental&)> spoil;
  };
  const std::vector<Case> cases = {
      {"image", [](K8sRental& r) { r.image = "nvcr.io/nvidia/PyTorch:24.05"; }},  // upper case in the name
      {"image", [](K8sRental& r) { r.image = "busybox\",\"privileged\":true"; }},
      {"image", [](K8sRental& r) { r.image = "busybox; rm -rf /"; }},
      {"image", [](K8sRental& r) { r.image = ""; }},
      {"image", [](K8sRental& r) { r.image = "busybox@sha256:abc"; }},  // digest too short
      {"image", [](K8sRental& r) { r.image = std::string(600, 'a'); }},
      {"tenant_name", [](K8sRental& r) { r.tenant_name = "line\nbreak"; }},
      {"tenant_name", [](K8sRental& r) { r.tenant_name = std::string("bad \xff utf8"); }},
      {"tenant_name", [](K8sRental& r) { r.tenant_name = std::string(200, 'x'); }},
      {"node_name", [](K8sRental& r) { r.node_name = "Node_7"; }},
      {"node_name", [](K8sRental& r) { r.node_name = ""; }},
      {"gpu_uuid", [](K8sRental& r) { r.gpu_uuid = "GPU-1' || true || '"; }},  // a CEL injection
      {"mig_profile", [](K8sRental& r) { r.mig_profile = "3g.40gb' || true"; }},
      {"rental_id", [](K8sRental& r) { r.rental_id = "r_../../etc"; }},
      {"tenant_id", [](K8sRental& r) { r.tenant_id = "t_" + std::string(80, 'a'); }},
      {"node_id", [](K8sRental& r) { r.node_id = "node id with spaces"; }},
      {"placement_start", [](K8sRental& r) { r.placement_start = -1; }},
      {"generation", [](K8sRental& r) { r.generation = -2; }},
  };
  for (const Case& c : cases) {
    for (K8sMode mode : {K8sMode::kDevicePlugin, K8sMode::kDra}) {
      K8sRental r = mig_rental();
      c.spoil(r);
      K8sOptions o;
      o.mode = mode;
      auto m = render_kubernetes(r, o);
      ASSERT_FALSE(m.ok()) << c.field;
      EXPECT_EQ(m.error().field, c.field) << m.error().message;
      EXPECT_NE(m.error().message.find(c.field), std::string::npos) << m.error().message;
    }
  }
  K8sOptions o;
  o.command = std::vector<std::string>(kMaxCommandItems + 1, "x");
  auto m = render_kubernetes(mig_rental(), o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, ErrorCode::kLimit);
  EXPECT_EQ(m.error().field, "command");
}

TEST(K8s, KubernetesNameRules) {
  EXPECT_TRUE(is_dns1123_label("gpuplan-tab12"));
  EXPECT_FALSE(is_dns1123_label("-a"));
  EXPECT_FALSE(is_dns1123_label("a_b"));
  EXPECT_FALSE(is_dns1123_label(std::string(64, 'a')));
  EXPECT_TRUE(is_dns1123_subdomain("node-1.example.com"));
  EXPECT_FALSE(is_dns1123_subdomain("node..x"));
  EXPECT_TRUE(is_label_value(""));
  EXPECT_TRUE(is_label_value("r_0a1b"));
  EXPECT_FALSE(is_label_value("_a"));
  for (const char* ok :
       {"busybox", "busybox:1.36", "library/busybox", "localhost:5000/x/y:tag", "nvcr.io/nvidia/pytorch:24.05-py3",
        "a.b-c__d/e", "registry.example.com:443/team/img@sha256:0123456789abcdef0123456789abcdef"}) {
    EXPECT_TRUE(is_image_reference(ok)) << ok;
  }
  for (const char* bad : {"Busybox", "busybox:", ":tag", "a//b", "a/-b", "a/b.", "a/b:-tag", "a b", "a\"b",
                          "a/b@sha256:xyz", "host:port/x", "a/b:t@"}) {
    EXPECT_FALSE(is_image_reference(bad)) << bad;
  }
}

TEST(K8s, KubectlArgvAndRunner) {
  KubectlConfig c;
  EXPECT_FALSE(kubectl_apply_argv(c).ok());  // no kubeconfig: nothing is run
  c.kubeconfig = "/etc/gpuplan/kubeconfig";
  c.context = "prod";
  auto argv = kubectl_apply_argv(c);
  ASSERT_TRUE(argv.ok());
  EXPECT_EQ(*argv, (std::vector<std::string>{"kubectl", "--kubeconfig", "/etc/gpuplan/kubeconfig", "--context", "prod",
                                             "apply", "--server-side", "--field-manager=gpuplan", "-f", "-"}));
  auto del = kubectl_delete_argv(c, mig_rental(), K8sMode::kDra);
  ASSERT_TRUE(del.ok());
  EXPECT_EQ(del->back(), "resourceclaim.resource.k8s.io/gpuplan-r0a1b2c3d4e5f60718293-g3");
  auto del_plugin = kubectl_delete_argv(c, mig_rental(), K8sMode::kDevicePlugin);
  ASSERT_TRUE(del_plugin.ok());
  EXPECT_EQ(del_plugin->back(), "pod/gpuplan-r0a1b2c3d4e5f60718293-g3");

  auto m = render_kubernetes(mig_rental(), K8sOptions{});
  ASSERT_TRUE(m.ok());
  std::vector<std::string> seen_argv;
  std::string seen_stdin;
  ProcessRunner fake = [&](const std::vector<std::string>& a, const std::string& in) -> Result<ProcessResult> {
    seen_argv = a;
    seen_stdin = in;
    return ProcessResult{0, "pod/gpuplan-r0a1b2c3d4e5f60718293-g3 serverside-applied\n", ""};
  };
  auto res = kubectl_apply(*m, c, fake);
  ASSERT_TRUE(res.ok()) << res.error().message;
  EXPECT_EQ(seen_argv, *argv);
  EXPECT_EQ(seen_stdin, manifest_list_text(*m));
  const Json list = Json::parse(seen_stdin);
  EXPECT_EQ(list["kind"], "List");
  EXPECT_EQ(list["items"].size(), m->size());

  ProcessRunner failing = [](const std::vector<std::string>&, const std::string&) -> Result<ProcessResult> {
    return ProcessResult{1, "", "error: You must be logged in to the server (Unauthorized)"};
  };
  res = kubectl_apply(*m, c, failing);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(res.error().message.find("Unauthorized"), std::string::npos);
}

}  // namespace
}  // namespace gpuplan::handoff

namespace gpuplan::handoff {
namespace {

TEST(K8s, RentalFromJsonRefusesUnknownKeysAndWrongTypes) {
  auto r = k8s_rental_from_json(Json{{"rental_id", "r_1"}, {"generation", 2}, {"mig_profile", nullptr}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->rental_id, "r_1");
  EXPECT_EQ(r->generation, 2);
  EXPECT_TRUE(r->mig_profile.empty());
  auto bad = k8s_rental_from_json(Json{{"rental_id", "r_1"}, {"imagee", "busybox"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "imagee");
  bad = k8s_rental_from_json(Json{{"generation", "2"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "generation");
  bad = k8s_rental_from_json(Json{{"image", 7}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "image");
  bad = k8s_rental_from_json(Json{{"placement_start", 99}});
  ASSERT_FALSE(bad.ok());
  EXPECT_FALSE(k8s_rental_from_json(Json::array()).ok());
}

}  // namespace
}  // namespace gpuplan::handoff

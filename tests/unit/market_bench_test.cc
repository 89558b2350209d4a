// Measured figures on live offers (issue #16, part 2), on every store kind: an agent's bench of its own GPU
// is stored and summarised on the offers of that GPU (the furthest below the datasheet of several); a
// GPU of another node is not found; a file for another GPU or with a figure above the catalog's peak is
// refused naming the field; a driver other than the inventory's is warned about.
#include <gtest/gtest.h>

#include "calibration_util.h"
#include "gpuplan/catalog.h"
#include "market_fixture.h"

namespace gpuplan::market {
namespace {

constexpr int64_t kPricePerHour = 3'600'000;
const std::string kBoot = "boot-1";

class MarketBench : public testing::StoreTest {
 protected:
  AgentPrincipal enrol_and_report(const Node& n, const std::string& name) {
    auto e = w.market->issue_enrollment(w.provider, n.id);
    EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
    auto t = w.market->enroll_agent(e->token, kBoot);
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
    auto a = w.market->authenticate_agent("Bearer " + t->token);
    EXPECT_TRUE(a.ok());
    Inventory inv;
    inv.seq = 1;
    inv.boot_id = kBoot;
    inv.driver_version = "550.54.15";
    inv.gpus.push_back(InventoryGpu{
        "GPU-" + name + "-0", "NVIDIA A100-SXM4-80GB", "00000000:10:00.0", 85'899'345'920, "disabled", {}});
    auto r = w.market->put_inventory(*a, inv);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return *a;
  }
  // A calibration of GPU-<name>-0 (an A100 80GB SXM4) at `bf16` of the dense peak at infinite intensity.
  static std::string calibration(const std::string& name, double bf16, const std::string& driver = "550.54.15") {
    auto ref = Catalog::embedded()->resolve("a100-80gb-sxm4");
    EXPECT_TRUE(ref.ok());
    calibration_testing::CalibrationTruth t;
    t.catalog_id = "a100-80gb-sxm4";
    t.uuid = "GPU-" + name + "-0";
    t.driver = driver;
    t.pcie_gen = 4;
    t.pcie_width = 16;
    t.curves = {calibration_testing::TruthCurve{Precision::kBf16, bf16, 80}};
    return calibration_testing::calibration_json(t, perf_device(Target::linked(*ref, 1))).dump();
  }
  std::optional<OfferMeasured> measured(const std::string& offer_id) {
    auto offers = w.market->list_offers();
    EXPECT_TRUE(offers.ok());
    for (const auto& o : *offers) {
      if (o.id == offer_id) return o.measured;
    }
    ADD_FAILURE() << "no offer " << offer_id;
    return std::nullopt;
  }
};

TEST_P(MarketBench, AnAgentsBenchOfItsOwnGpuIsOnTheOffers) {
  Node n1 = w.add_a100_node("n1", 1, MigPolicy::kNone);
  Node n2 = w.add_a100_node("n2", 1, MigPolicy::kNone);
  Offer whole = w.add_offer("a100-80gb-sxm4", 1, kPricePerHour);
  const AgentPrincipal a1 = enrol_and_report(n1, "n1");
  const AgentPrincipal a2 = enrol_and_report(n2, "n2");
  EXPECT_FALSE(measured(whole.id)) << "nothing measured yet";

  auto r = w.market->put_bench(a1, BenchReport{"GPU-n1-0", "", calibration("n1", 0.9)});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->target, "a100-80gb-sxm4");
  EXPECT_TRUE(r->warnings.empty()) << r->warnings.front();
  const OfferMeasured& m = r->measured;
  // The best bf16 point (16384^3: I = 5461, 0.9 x 5461 / (5461 + 80) = 0.887 of 312 TFLOPS).
  EXPECT_NEAR(m.ratio_to_datasheet, 0.887, 0.01);
  EXPECT_NEAR(m.bf16_dense_tflops, 312 * m.ratio_to_datasheet, 0.5);
  EXPECT_NEAR(m.ratio, 0.85, 1e-6);  // calibration_util's bandwidth fraction
  EXPECT_EQ(m.pcie_gen, 4);
  EXPECT_EQ(m.pcie_width, 16);
  EXPECT_EQ(m.method, "gpuplan bench 1");
  auto fitted = parse_efficiency(m.efficiency, default_efficiency());
  ASSERT_TRUE(fitted.ok()) << m.efficiency;
  EXPECT_NEAR(fitted->gemm_peak_fraction, 0.9, 0.02) << m.efficiency;
  EXPECT_NEAR(fitted->bandwidth_fraction, 0.85, 1e-4) << m.efficiency;
  auto shown = measured(whole.id);
  ASSERT_TRUE(shown);
  EXPECT_EQ(shown->gpus_measured, 1);
  EXPECT_NEAR(shown->ratio_to_datasheet, m.ratio_to_datasheet, 1e-9);

  // An agent reports for its own node only: node 1's agent on node 2's GPU is not found.
  auto other = w.market->put_bench(a1, BenchReport{"GPU-n2-0", "", calibration("n2", 0.9)});
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(other.error().field, "gpu_uuid");

  // A second, slower host: the offer shows the one furthest below the datasheet, of two measured.
  auto slow = w.market->put_bench(a2, BenchReport{"GPU-n2-0", "", calibration("n2", 0.6)});
  ASSERT_TRUE(slow.ok()) << slow.error().message;
  shown = measured(whole.id);
  ASSERT_TRUE(shown);
  EXPECT_EQ(shown->gpus_measured, 2);
  EXPECT_NEAR(shown->ratio_to_datasheet, slow->measured.ratio_to_datasheet, 1e-9);
  // A new bench replaces the GPU's last one.
  ASSERT_TRUE(w.market->put_bench(a2, BenchReport{"GPU-n2-0", "", calibration("n2", 0.95)}).ok());
  shown = measured(whole.id);
  ASSERT_TRUE(shown);
  EXPECT_EQ(shown->gpus_measured, 2);
  EXPECT_NEAR(shown->ratio_to_datasheet, m.ratio_to_datasheet, 1e-9);
}

TEST_P(MarketBench, RefusesAFileOfAnotherGpuOrAboveThePeakAndWarnsOfAnotherDriver) {
  Node n1 = w.add_a100_node("n1", 1, MigPolicy::kNone);
  const AgentPrincipal a1 = enrol_and_report(n1, "n1");
  // The file says another uuid than the report.
  auto wrong = w.market->put_bench(a1, BenchReport{"GPU-n1-0", "", calibration("zz", 0.9)});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().field, "calibration.device.uuid");
  // A figure above the catalog's peak: a timing bug.
  Json j = Json::parse(calibration("n1", 0.9));
  j["gemm"][0]["tflops_sustained"] = 900.0;
  j["gemm"][0]["tflops_burst"] = 900.0;
  auto fast = w.market->put_bench(a1, BenchReport{"GPU-n1-0", "", j.dump()});
  ASSERT_FALSE(fast.ok());
  EXPECT_EQ(fast.error().field, "calibration.gemm[0].tflops_sustained");
  // Malformed: the reader's field.
  auto bad = w.market->put_bench(a1, BenchReport{"GPU-n1-0", "", "{\"schema\": \"gpuplan.calibration/1\"}"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "calibration.created_at");
  // Another driver than the inventory's (550.54.15): stored, with a warning.
  auto drv = w.market->put_bench(a1, BenchReport{"GPU-n1-0", "", calibration("n1", 0.9, "570.86.15")});
  ASSERT_TRUE(drv.ok()) << drv.error().message;
  ASSERT_EQ(drv->warnings.size(), 1u);
  EXPECT_NE(drv->warnings[0].find("driver 570.86.15"), std::string::npos) << drv->warnings[0];
  // A MIG profile the GPU does not have.
  Json mig = Json::parse(calibration("n1", 0.9));
  mig["device"]["mig_profile"] = "9g.99gb";
  auto p = w.market->put_bench(a1, BenchReport{"GPU-n1-0", "9g.99gb", mig.dump()});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().field, "profile");
}

// Benches on request (issue #16): the provider's request is a generation on the node; the heartbeat answer
// carries it until a bench answers it; an answer to a request never made, or a second answer of the GPU
// to the same request, is refused (kConflict, field bench_request); another tenant's node is not found.
TEST_P(MarketBench, ARequestIsCarriedByTheHeartbeatUntilABenchAnswersItAndAnswersAreFenced) {
  Node n = w.add_a100_node("n1", 1, MigPolicy::kNone);
  AgentPrincipal a = enrol_and_report(n, "n1");
  auto hb = w.market->heartbeat(a, Heartbeat{2, kBoot, {}});
  ASSERT_TRUE(hb.ok()) << hb.error().message;
  EXPECT_EQ(hb->bench_request, 0);
  std::string other_id;
  Principal other = w.add_tenant("prov2", TenantKind::kProvider, &other_id);
  for (const Principal* p : {&other, &w.renter_a}) {
    auto no = w.market->request_bench(*p, n.id);
    ASSERT_FALSE(no.ok());
    EXPECT_EQ(no.error().code, ErrorCode::kNotFound);
  }
  auto req = w.market->request_bench(w.provider, n.id);
  ASSERT_TRUE(req.ok()) << req.error().message;
  EXPECT_EQ(req->bench_request, 1);
  hb = w.market->heartbeat(a, Heartbeat{3, kBoot, {}});
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->bench_request, 1);
  // Never asked: request 2.
  auto future = w.market->put_bench(a, BenchReport{"GPU-n1-0", "", calibration("n1", 0.9), 2});
  ASSERT_FALSE(future.ok());
  EXPECT_EQ(future.error().code, ErrorCode::kConflict);
  EXPECT_EQ(future.error().field, "bench_request");
  auto answer = w.market->put_bench(a, BenchReport{"GPU-n1-0", "", calibration("n1", 0.9), 1});
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  EXPECT_EQ(answer->bench_request, 1);
  hb = w.market->heartbeat(a, Heartbeat{4, kBoot, {}});
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->bench_request, 0);  // answered
  auto dup = w.market->put_bench(a, BenchReport{"GPU-n1-0", "", calibration("n1", 0.8), 1});
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().code, ErrorCode::kConflict);
  EXPECT_EQ(dup.error().field, "bench_request");
  auto measured_now = measured(w.add_offer("a100-80gb-sxm4", 1, kPricePerHour).id);
  ASSERT_TRUE(measured_now.has_value());
  EXPECT_NEAR(measured_now->ratio_to_datasheet, 0.9, 0.05);  // the duplicate's 0.8 was not stored
  // A second request; an unrequested bench is stored but does not answer it.
  ASSERT_EQ(w.market->request_bench(w.provider, n.id)->bench_request, 2);
  ASSERT_TRUE(w.market->put_bench(a, BenchReport{"GPU-n1-0", "", calibration("n1", 0.9)}).ok());
  hb = w.market->heartbeat(a, Heartbeat{5, kBoot, {}});
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->bench_request, 2);
  ASSERT_TRUE(w.market->put_bench(a, BenchReport{"GPU-n1-0", "", calibration("n1", 0.9), 2}).ok());
  hb = w.market->heartbeat(a, Heartbeat{6, kBoot, {}});
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->bench_request, 0);
}

INSTANTIATE_TEST_SUITE_P(Stores, MarketBench, ::testing::ValuesIn(testing::kStoreKinds), testing::store_name);

}  // namespace
}  // namespace gpuplan::market

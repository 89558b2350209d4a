// `gpuplan offers import` (issue #18): SkyPilot's catalog files and gpuplan's CSV into the offers CSV,
// every row dated and sourced, read back by parse_offers with nothing skipped.
#include <gtest/gtest.h>

#include "gpuplan/offers.h"

namespace gpuplan {
namespace {

ImportOptions skypilot(std::string provider = "aws") {
  ImportOptions o;
  o.format = "skypilot";
  o.provider = std::move(provider);
  o.captured_at = "2026-11-30";
  o.source = "https://github.com/skypilot-org/skypilot-catalog/blob/x/catalogs/v7/aws/vms.csv";
  return o;
}

// The columns of catalogs/v7/aws/vms.csv, in its order (AvailabilityZone last; lambda's has none).
constexpr const char* kAws =
    "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone\n"
    "m5.large,,,2.0,8.0,,0.096,0.04,us-east-1,us-east-1a\n"
    "g6.xlarge,L4,1.0,4.0,16.0,\"{'Gpus': [{'Name': 'L4', 'Count': 1}]}\",0.805,0.40,us-east-1,us-east-1a\n"
    "g6.xlarge,L4,1.0,4.0,16.0,\"{'Gpus': [{'Name': 'L4', 'Count': 1}]}\",0.805,0.31,us-east-1,us-east-1b\n"
    "g6.xlarge,L4,1.0,4.0,16.0,,0.9,,eu-west-1,eu-west-1a\n"
    "p4d.24xlarge,A100,8.0,96.0,1152.0,,32.77,,us-east-1,us-east-1a\n"
    "nv6ads,A10,0.167,6.0,55.0,,0.454,,eastus,\n";

TEST(OffersImport, SkyPilotRowsOnePerRegionWithTheLowestZoneSpotPrice) {
  const auto catalog = Catalog::embedded();  // held: the reference below outlives no temporary
  const Catalog& cat = *catalog;
  auto r = import_offers(cat, "vms.csv", kAws, skypilot());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->offers, 2u);  // g6.xlarge in us-east-1 (two zones) and eu-west-1
  auto back = parse_offers(cat, "imported.csv", r->csv);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(back->skipped.empty());
  ASSERT_EQ(back->offers.size(), 2u);
  const Offer& o = back->offers[0];
  EXPECT_EQ(o.provider, "aws");
  EXPECT_EQ(o.region, "us-east-1");
  EXPECT_EQ(o.name, "g6.xlarge");
  EXPECT_EQ(o.target.id(), "l4");
  EXPECT_EQ(o.gpus, 1);
  EXPECT_EQ(o.vcpus, 4);
  // SkyPilot's MemoryGiB 16 in 10^9-byte GB (issue #18: the importer wrote 16, 7 % low).
  EXPECT_DOUBLE_EQ(o.ram_gb, 17.2);
  EXPECT_DOUBLE_EQ(o.price_hour.value_or(0), 0.805);
  EXPECT_DOUBLE_EQ(o.spot_price_hour.value_or(0), 0.31);  // the cheaper zone
  EXPECT_EQ(o.captured_at, "2026-11-30");
  EXPECT_EQ(o.source, skypilot().source);
  EXPECT_FALSE(o.marketplace);
  EXPECT_FALSE(back->offers[1].spot_price_hour.has_value());
  // The CPU-only row is no offer; the A100 (four GPUs) and the sixth of an A10 are skipped with reasons.
  ASSERT_EQ(r->skipped.size(), 2u);
  EXPECT_EQ(r->skipped[0].line, 7);
  EXPECT_NE(r->skipped[0].reason.find("fractional GPU"), std::string::npos) << r->skipped[0].reason;
  EXPECT_EQ(r->skipped[1].line, 6);
  EXPECT_NE(r->skipped[1].reason.find("matches"), std::string::npos) << r->skipped[1].reason;
}

TEST(OffersImport, AMapNamesWhatTheCatalogCannotAndAMarketplaceIsMarked) {
  auto o = skypilot("vast");
  o.gpu_map["A100"] = "a100-40gb-sxm4";
  o.price_kind = "marketplace";
  const auto catalog = Catalog::embedded();
  auto r = import_offers(*catalog, "vms.csv", kAws, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->offers, 3u);
  auto back = parse_offers(*catalog, "imported.csv", r->csv);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->offers.size(), 3u);
  EXPECT_EQ(back->offers[2].target.id(), "a100-40gb-sxm4");
  EXPECT_EQ(back->offers[2].gpus, 8);
  EXPECT_TRUE(back->offers[2].marketplace);
}

TEST(OffersImport, GpuplanCsvRowsGetTheImportsDateAndSourceWhereTheyHaveNone) {
  ImportOptions o = skypilot();
  o.format = "csv";
  const char* csv =
      "provider,region,offer,gpu,gpus,interconnect,vcpus,ram_gb,price_hour,spot_price_hour,currency,available,"
      "captured_at,source\n"
      "p,r,a,l4,1,pcie,4,16,0.8,,USD,yes,,\n"
      "p,r,b,l4,1,pcie,4,16,0.9,,USD,yes,2026-10-01,https://kept\n";
  const auto catalog = Catalog::embedded();
  auto r = import_offers(*catalog, "mine.csv", csv, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto back = parse_offers(*catalog, "imported.csv", r->csv);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->offers.size(), 2u);
  EXPECT_EQ(back->offers[0].captured_at, "2026-11-30");
  EXPECT_EQ(back->offers[0].source, o.source);
  EXPECT_EQ(back->offers[1].captured_at, "2026-10-01");
  EXPECT_EQ(back->offers[1].source, "https://kept");
}

// Issue #18: gpuplan's CSV with the billing and fabric columns keeps them through an import (the old
// import wrote only the fixed columns and price_kind, dropping a stated fabric and billing step).
TEST(OffersImport, GpuplanCsvKeepsTheBillingAndFabricColumns) {
  ImportOptions o = skypilot();
  o.format = "csv";
  const char* csv =
      "provider,region,offer,gpu,gpus,interconnect,vcpus,ram_gb,price_hour,spot_price_hour,currency,available,"
      "captured_at,source,fabric,billing,min_billable_seconds,startup_seconds,proxy\n"
      "p,r,a,h100-80gb-sxm5,8,nvlink,96,1000,20,,USD,yes,,,infiniband,per-minute,600,90,\n"
      "p,r,b,l4,1,pcie,4,16,0.9,,USD,yes,2026-10-01,https://kept,,,,,a share of an L40S\n";
  const auto catalog = Catalog::embedded();
  auto r = import_offers(*catalog, "mine.csv", csv, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NE(r->csv.find("price_kind,fabric,billing,min_billable_seconds,startup_seconds,proxy\n"), std::string::npos);
  auto back = parse_offers(*catalog, "imported.csv", r->csv);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->offers.size(), 2u);
  EXPECT_EQ(back->offers[0].fabric, Fabric::kInfiniband);
  EXPECT_EQ(back->offers[0].billing, BillingUnit::kMinute);
  EXPECT_EQ(back->offers[0].min_billable_seconds, 600);
  EXPECT_DOUBLE_EQ(back->offers[0].startup_seconds, 90);
  EXPECT_EQ(back->offers[1].fabric, Fabric::kNone);
  EXPECT_EQ(back->offers[1].billing_source, provider_terms("p").source);
  // The proxy mark (issue #18) goes through an import too.
  EXPECT_FALSE(back->offers[0].is_proxy());
  EXPECT_EQ(back->offers[1].proxy, "a share of an L40S");
}

TEST(OffersImport, MistakesNameTheirField) {
  const auto catalog = Catalog::embedded();  // held: the reference below outlives no temporary
  const Catalog& cat = *catalog;
  auto o = skypilot("");
  auto r = import_offers(cat, "vms.csv", kAws, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().field, "provider");
  o = skypilot();
  o.captured_at = "yesterday";
  EXPECT_EQ(import_offers(cat, "vms.csv", kAws, o).error().field, "captured_at");
  o = skypilot();
  o.format = "xlsx";
  EXPECT_EQ(import_offers(cat, "vms.csv", kAws, o).error().field, "format");
  auto missing = import_offers(cat, "vms.csv", "InstanceType,Price\nx,1\n", skypilot());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("lacks column 'AcceleratorName'"), std::string::npos)
      << missing.error().message;
  EXPECT_FALSE(import_offers(cat, "vms.csv", "", skypilot()).ok());
}

// Issue #18: GCP's layout. SkyPilot's GCP catalog lists a G2 machine with no accelerator and its host price
// only, and the L4s it carries as rows with an empty InstanceType priced per zone; the importer took the G2
// rows for CPU-only machines (no GCP L4 offer at all) and skipped the GPU rows for lacking an offer name. A
// machine type of data/offers/host_gpus.yaml now gets the two prices added in the same zone.
constexpr const char* kGcp =
    "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,Price,SpotPrice\n"
    "a2-highgpu-1g,12.0,85.0,,,,us-central1,us-central1-a,0.73948,0.38812\n"
    "g2-standard-4,4.0,16.0,,,,us-central1,us-central1-a,0.14679,0.07502\n"
    "g2-standard-4,4.0,16.0,,,,us-central1,us-central1-b,0.14679,0.07502\n"
    "g2-standard-24,24.0,96.0,,,,us-central1,us-central1-a,0.88075,0.4501\n"
    ",,,L4,1,{'Gpus': [{'MemoryInfo': {'SizeInMiB': 24576}}]},us-central1,us-central1-a,0.56004,0.2862\n"
    ",,,L4,1,{'Gpus': [{'MemoryInfo': {'SizeInMiB': 24576}}]},us-central1,us-central1-b,0.56004,0.2761\n";

TEST(OffersImport, GcpG2MachinesGetTheirL4RowsPriceAddedInTheSameZone) {
  const auto catalog = Catalog::embedded();
  auto o = skypilot("gcp");
  auto r = import_offers(*catalog, "vms.csv", kGcp, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->offers, 1u) << r->csv;
  auto back = parse_offers(*catalog, "imported.csv", r->csv);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->offers.size(), 1u);
  const Offer& g2 = back->offers[0];
  EXPECT_EQ(g2.name, "g2-standard-4");
  EXPECT_EQ(g2.region, "us-central1");
  EXPECT_EQ(g2.target.id(), "l4");
  EXPECT_EQ(g2.gpus, 1);
  EXPECT_NEAR(g2.price_hour.value_or(0), 0.14679 + 0.56004, 1e-9);      // 0.70683, GCP's list price
  EXPECT_NEAR(g2.spot_price_hour.value_or(0), 0.07502 + 0.2761, 1e-9);  // the cheaper zone's sum
  EXPECT_DOUBLE_EQ(g2.ram_gb, 17.2);
  // g2-standard-24 carries 2 L4s; the file has no "L4,2" row in its zone: skipped with the reason. The a2
  // machine is not listed (its GPUs are another table's), so it stays a CPU-only row, not an offer.
  ASSERT_EQ(r->skipped.size(), 1u);
  EXPECT_EQ(r->skipped[0].line, 5);
  EXPECT_NE(r->skipped[0].reason.find("no price for its 2 L4 GPU(s) in the same zone"), std::string::npos)
      << r->skipped[0].reason;
  // Another provider's file is read as before: no table, so the G2 rows are CPU-only.
  EXPECT_EQ(import_offers(*catalog, "vms.csv", kGcp, skypilot("aws"))->offers, 0u);
}

}  // namespace
}  // namespace gpuplan

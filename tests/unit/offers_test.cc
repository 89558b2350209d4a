#include "gpuplan/offers.h"

#include <gtest/gtest.h>

namespace gpuplan {
namespace {

constexpr const char* kHeader =
    "provider,region,offer,gpu,gpus,interconnect,vcpus,ram_gb,price_hour,spot_price_hour,currency,available,captured_"
    "at,source\n";

TEST(Offers, ShippedSnapshotParsesAndResolvesEveryLine) {
  auto set = default_offers(*Catalog::embedded());
  ASSERT_TRUE(set.ok()) << set.error().message;
  EXPECT_GE(set->offers.size(), 60u);
  for (const auto& s : set->skipped) ADD_FAILURE() << s.file << ":" << s.line << ": " << s.reason;
  for (const auto& o : set->offers) {
    EXPECT_FALSE(o.source.empty()) << o.id();
    EXPECT_TRUE(age_days(o.captured_at, "2026-11-30").has_value()) << o.id();
  }
}

TEST(Offers, PerGpuPriceIsDerivedFromTheInstancePrice) {
  auto set = parse_offers(
      *Catalog::embedded(), "t.csv",
      std::string(kHeader) +
          "aws,us-east-1,p4d.24xlarge,NVIDIA A100-SXM4-40GB,8,nvlink,96,1152,32.77,,USD,yes,2026-06-03,https://x\n");
  ASSERT_TRUE(set.ok());
  ASSERT_EQ(set->offers.size(), 1u);
  const Offer& o = set->offers[0];
  EXPECT_EQ(o.target.id(), "a100-40gb-sxm4");
  EXPECT_EQ(o.interconnect, Link::kNvlink);
  EXPECT_NEAR(*o.price_per_gpu_hour(false), 32.77 / 8, 1e-12);
  EXPECT_FALSE(o.price_per_gpu_hour(true).has_value());
}

TEST(Offers, BadLinesAreSkippedWithTheirReasonNeverGuessed) {
  const std::string text = std::string(kHeader) +
                           "x,r,one,a100,1,pcie,8,60,1.0,,USD,yes,2026-06-03,s\n"     // ambiguous
                           "x,r,two,a1000,1,pcie,8,60,1.0,,USD,yes,2026-06-03,s\n"    // unknown
                           "x,r,three,a40,1,pcie,8,60,cheap,,USD,yes,2026-06-03,s\n"  // bad price
                           "x,r,four,a40,1,pcie,8,60,1.0,,USD,maybe,2026-06-03,s\n"   // bad available
                           "x,r,five,a40,1,pcie,8,60,1.0,,USD,3,2026-06-03,s\n"       // good, count
                           "x,r,six,a40,1,pcie\n";                                    // short
  auto set = parse_offers(*Catalog::embedded(), "t.csv", text);
  ASSERT_TRUE(set.ok());
  ASSERT_EQ(set->offers.size(), 1u);
  EXPECT_EQ(set->offers[0].available_count, 3);
  ASSERT_EQ(set->skipped.size(), 5u);
  EXPECT_NE(set->skipped[0].reason.find("matches"), std::string::npos);
  EXPECT_EQ(set->skipped[0].line, 2);
  EXPECT_NE(set->skipped[1].reason.find("unknown GPU"), std::string::npos);
  EXPECT_NE(set->skipped[2].reason.find("price_hour"), std::string::npos);
  EXPECT_NE(set->skipped[3].reason.find("available"), std::string::npos);
  EXPECT_NE(set->skipped[4].reason.find("fields"), std::string::npos);
}

TEST(Offers, MissingHeaderColumnIsAnError) {
  auto set = parse_offers(*Catalog::embedded(), "t.csv", "provider,region\nx,y\n");
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.error().code, ErrorCode::kInvalidData);
  EXPECT_NE(set.error().message.find("offer"), std::string::npos);
}

TEST(Offers, YamlUsesTheSameKeysAndMigTargets) {
  auto set = parse_offers(*Catalog::embedded(), "t.yaml",
                          "offers:\n  - {provider: p, region: r, offer: slice, gpu: a100-40gb-sxm4/3g.20gb, gpus: 1,"
                          " price_hour: 0.9, captured_at: 2026-11-01, source: https://x}\n");
  ASSERT_TRUE(set.ok()) << set.error().message;
  ASSERT_EQ(set->offers.size(), 1u);
  EXPECT_TRUE(set->offers[0].target.is_mig());
}

TEST(Offers, AgeInDays) {
  EXPECT_DOUBLE_EQ(*age_days("2026-06-03", "2026-11-30"), 180.0);
  EXPECT_DOUBLE_EQ(*age_days("2024-02-28", "2024-03-01"), 2.0);
  EXPECT_NEAR(*age_days("2026-11-30T00:00:00Z", "2026-11-30T12:00:00Z"), 0.5, 1e-9);
  EXPECT_FALSE(age_days("last week", "2026-11-30").has_value());
}

// Issue #18: the optional columns fabric, billing, min_billable_seconds and startup_seconds; a file
// without them (the shipped snapshot, an older user file) gets each provider's documented terms.
TEST(Offers, BillingAndFabricColumnsAndProviderDefaults) {
  const std::string header = std::string(kHeader).substr(0, std::string(kHeader).size() - 1) +
                             ",fabric,billing,min_billable_seconds,startup_seconds\n";
  auto set = parse_offers(*Catalog::embedded(), "t.csv",
                          header +
                              "aws,r,a,h100-80gb-sxm5,8,nvlink,96,1000,40,,USD,yes,2026-11-01,s,efa,,,\n"
                              "lambda,r,b,h100-80gb-sxm5,1,pcie,8,60,3,,USD,yes,2026-11-01,s,,,,\n"
                              "cudo,r,c,h100-80gb-sxm5,1,pcie,8,60,2,,USD,yes,2026-11-01,s,,,,\n"
                              "cudo,r,d,h100-80gb-sxm5,1,pcie,8,60,2,,USD,yes,2026-11-01,s,roce,per-minute,120,45\n"
                              "x,r,e,h100-80gb-sxm5,1,pcie,8,60,2,,USD,yes,2026-11-01,s,ethernet,,,\n"
                              "x,r,f,h100-80gb-sxm5,1,pcie,8,60,2,,USD,yes,2026-11-01,s,,per-day,,\n"
                              "x,r,g,h100-80gb-sxm5,1,pcie,8,60,2,,USD,yes,2026-11-01,s,,,-1,\n"
                              "x,r,h,h100-80gb-sxm5,1,pcie,8,60,2,,USD,yes,2026-11-01,s,,,,1e9\n");
  ASSERT_TRUE(set.ok()) << set.error().message;
  ASSERT_EQ(set->offers.size(), 4u);
  const Offer& aws = set->offers[0];
  EXPECT_EQ(aws.fabric, Fabric::kEfa);
  EXPECT_EQ(aws.billing, BillingUnit::kSecond);
  EXPECT_EQ(aws.min_billable_seconds, 60);
  EXPECT_GT(aws.startup_seconds, 0);
  EXPECT_NE(aws.billing_source.find("aws.amazon.com"), std::string::npos);
  EXPECT_EQ(set->offers[1].billing, BillingUnit::kMinute);  // Lambda: one-minute increments
  EXPECT_EQ(set->offers[1].fabric, Fabric::kNone);
  // A provider whose terms are not verified: the conservative per-hour default, and it says so.
  EXPECT_EQ(set->offers[2].billing, BillingUnit::kHour);
  EXPECT_EQ(set->offers[2].min_billable_seconds, 3600);
  EXPECT_NE(set->offers[2].billing_source.find("not verified"), std::string::npos);
  EXPECT_FALSE(provider_terms("cudo").known);
  EXPECT_TRUE(provider_terms("gcp").known);
  // The columns win over the provider's terms.
  const Offer& d = set->offers[3];
  EXPECT_EQ(d.fabric, Fabric::kRoce);
  EXPECT_EQ(d.billing, BillingUnit::kMinute);
  EXPECT_EQ(d.min_billable_seconds, 120);
  EXPECT_DOUBLE_EQ(d.startup_seconds, 45);
  EXPECT_EQ(d.billing_source, "offer");
  ASSERT_EQ(set->skipped.size(), 4u);
  EXPECT_NE(set->skipped[0].reason.find("fabric 'ethernet'"), std::string::npos) << set->skipped[0].reason;
  EXPECT_NE(set->skipped[1].reason.find("billing 'per-day'"), std::string::npos) << set->skipped[1].reason;
  EXPECT_NE(set->skipped[2].reason.find("min_billable_seconds"), std::string::npos) << set->skipped[2].reason;
  EXPECT_NE(set->skipped[3].reason.find("over the bound"), std::string::npos) << set->skipped[3].reason;
  // The shipped snapshot has none of the columns: every row gets its provider's terms.
  auto shipped = default_offers(*Catalog::embedded());
  ASSERT_TRUE(shipped.ok());
  for (const auto& o : shipped->offers) EXPECT_FALSE(o.billing_source.empty()) << o.id();
}

// Issue #18: a proxy (a stand-in priced from another product) is a column of its own, not a word in the
// offer's name: the shipped Vultr row is one, with its reason, and no offer's name says "proxy" any more.
TEST(Offers, ProxyIsAColumnWithItsReasonNotAWordInTheName) {
  const std::string header = std::string(kHeader).substr(0, std::string(kHeader).size() - 1) + ",proxy\n";
  auto set = parse_offers(*Catalog::embedded(), "t.csv",
                          header +
                              "v,r,a,a100-40gb-sxm4/3g.20gb,1,pcie,3,30,0.67,,USD,yes,2026-11-01,s,a 20 GB share\n"
                              "v,r,b,a100-40gb-sxm4/3g.20gb,1,pcie,3,30,0.67,,USD,yes,2026-11-01,s,no\n"
                              "v,r,c,a100-40gb-sxm4/3g.20gb,1,pcie,3,30,0.67,,USD,yes,2026-11-01,s,\n");
  ASSERT_TRUE(set.ok()) << set.error().message;
  ASSERT_EQ(set->offers.size(), 3u);
  EXPECT_TRUE(set->offers[0].is_proxy());
  EXPECT_EQ(set->offers[0].proxy, "a 20 GB share");
  EXPECT_FALSE(set->offers[1].is_proxy());
  EXPECT_FALSE(set->offers[2].is_proxy());
  auto shipped = default_offers(*Catalog::embedded());
  ASSERT_TRUE(shipped.ok());
  int proxies = 0;
  for (const auto& o : shipped->offers) {
    EXPECT_EQ(o.name.find("proxy"), std::string::npos) << o.id();
    if (!o.is_proxy()) continue;
    ++proxies;
    EXPECT_EQ(o.provider, "vultr");
    EXPECT_EQ(o.target.id(), "a100-40gb-sxm4/3g.20gb");
    EXPECT_NE(o.proxy.find("not a MIG slice"), std::string::npos) << o.proxy;
  }
  EXPECT_EQ(proxies, 1);
}

}  // namespace
}  // namespace gpuplan

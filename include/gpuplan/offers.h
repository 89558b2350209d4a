// Providers' offers: what an instance costs per hour, which GPUs it holds and how they are linked.
// Offers come from CSV (the shipped snapshot, a user's file) or YAML with the same keys, or are a
// snapshot of the market's live offers (issue #13) that the server hands to the pure commands: one row
// type for both, told apart by `market_id`. GPU names are resolved through the catalog's aliases; a line
// whose GPU is unknown or ambiguous, or whose fields are malformed, is reported and skipped, never guessed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/catalog.h"
#include "gpuplan/target.h"

namespace gpuplan {

// How an offer's instances reach each other (column `fabric`): none (the default: separately rented
// machines on the provider's ordinary network), or a cluster fabric the provider states for the offer
// (InfiniBand, RoCE, AWS EFA). Tensor and pipeline parallelism span instances only over a fabric.
enum class Fabric { kNone, kInfiniband, kRoce, kEfa };
std::string_view fabric_name(Fabric f);  // "none", "infiniband", "roce", "efa"

// The step a provider bills running time in (column `billing`): a started step is billed whole.
enum class BillingUnit { kSecond, kMinute, kHour };
std::string_view billing_name(BillingUnit u);  // "per-second", "per-minute", "per-hour"
int64_t billing_unit_seconds(BillingUnit u);

// A provider's billing terms and start-up time, used for an offer whose file leaves the columns
// `billing`, `min_billable_seconds` or `startup_seconds` empty (data/offers/README.md lists each with
// its source; a provider not listed gets the conservative default, per-hour with a one-hour minimum).
struct ProviderTerms {
  BillingUnit billing = BillingUnit::kHour;
  int64_t min_billable_seconds = 0;
  double startup_seconds = 0;  // provisioning: from asking for the instance to its first command
  std::string_view source;     // where the billing terms are stated (a URL), or why they are a default
  bool known = false;          // false: the conservative default for a provider not listed
};
ProviderTerms provider_terms(std::string_view provider);

struct Offer {
  std::string provider;
  std::string region;
  std::string name;  // the provider's instance type ("p4d.24xlarge")
  TargetRef target;  // the GPU or MIG profile each of the instance's devices is
  int gpus = 1;      // devices per instance
  Link interconnect = Link::kPcie;
  int vcpus = 0;
  double ram_gb = 0;
  std::optional<double> price_hour;       // per instance-hour, on demand
  std::optional<double> spot_price_hour;  // per instance-hour, spot/interruptible
  std::string currency;
  bool available = true;
  std::optional<int> available_count;  // when the provider says how many
  std::string captured_at;             // ISO 8601 date or time of the price
  std::string source;                  // URL (a file row); "market" (a market row)
  std::string file;                    // where the offer was read ("market" for a market row)
  int line = 0;
  Fabric fabric = Fabric::kNone;  // the network between instances the offer states (column fabric)
  // A live market offer: its id in the market (empty: a row of an offers file), and whether its
  // provider is the demo inventory of `make run` (demo data, marked so in the API and the page).
  std::string market_id;
  bool demo = false;
  // Billing step and start-up (issue #18): a file row's columns, else its provider's terms
  // (provider_terms); a market row bills per second from running (docs/market.md) and starts at once.
  BillingUnit billing = BillingUnit::kSecond;
  int64_t min_billable_seconds = 0;  // the shortest time an instance is billed for (market rows: the market's)
  double startup_seconds = 0;        // provisioning: asking for the instance until it runs a command
  std::string billing_source;        // "offer" (the file's columns), a provider's URL, or the default's reason
  // Market rows whose GPUs reported a bench (PUT /agent/bench, issue #16): the `measured` object as the
  // market lists it (JSON text; empty: none), and its fitted curves as `--efficiency` text, which plan
  // applies to this offer (plan option `measured`).
  std::string measured_json;
  std::string measured_efficiency;
  // A marketplace's ask (column price_kind = marketplace: vast.ai's hosts reprice hourly), not a cloud's
  // list price: an old one is dropped after a short cut-off, where an old list price is kept with a warning.
  bool marketplace = false;
  // A stand-in (column `proxy`, issue #18): the price of another product standing for this target where no
  // public price of the target itself was found (the snapshot's Vultr 20 GB share of an A100 80GB for an
  // A100-40GB 3g.20gb slice). The text says what the product is and why it stands in; empty (or "no"): a
  // real offer of the target. The planner ranks a proxy after every real offer that meets the goal, and every
  // output marks it (JSON `proxy: true` with `proxy_reason`).
  std::string proxy;

  bool is_proxy() const { return !proxy.empty(); }
  bool is_market() const { return !market_id.empty(); }

  // Seconds one instance is billed for when it runs `seconds`: rounded up to the billing step, at
  // least the minimum.
  double billed_seconds(double seconds) const;
  // Per GPU-hour (derived): the instance price divided by its devices; nullopt when not sold.
  std::optional<double> price_per_gpu_hour(bool spot) const;
  std::string id() const;  // "provider/region/name"; a market row: its market id
};

struct SkippedOffer {
  std::string file;
  int line = 0;
  std::string reason;
};

struct OfferSet {
  std::vector<Offer> offers;
  std::vector<SkippedOffer> skipped;
};

// Parses an offers file. CSV needs the header
// provider,region,offer,gpu,gpus,interconnect,vcpus,ram_gb,price_hour,spot_price_hour,currency,available,captured_at,source
// (any column order), and optionally price_kind (list, the default, or marketplace), fabric (none,
// infiniband, roce, efa), billing (per-second, per-minute, per-hour), min_billable_seconds and
// startup_seconds (empty: the provider's terms), and proxy (empty: a real offer; else why it stands in). YAML holds
// `offers:` with the same keys. A broken header or document is an error; a broken line is skipped with its reason.
Result<OfferSet> parse_offers(const Catalog& catalog, const std::string& file_name, std::string_view text);
// The snapshot shipped under data/offers/.
Result<OfferSet> default_offers(const Catalog& catalog);

// Turning a price list someone downloaded into gpuplan's offers CSV (`gpuplan offers import`, issue #18).
// Formats: "skypilot", SkyPilot's public catalog files (skypilot-org/skypilot-catalog catalogs/v*/<cloud>/
// vms.csv: InstanceType, AcceleratorName, AcceleratorCount, vCPUs, MemoryGiB, Price, SpotPrice, Region and,
// for some clouds, AvailabilityZone and GpuInfo; columns found by name); "csv", gpuplan's own columns
// (rows without a date or source get the import's). Every row is read as parse_offers reads it (GPU
// names through the catalog's aliases); one it cannot read is skipped with its reason, never guessed.
struct ImportOptions {
  std::string format;       // "skypilot" or "csv"
  std::string provider;     // skypilot: the provider column (its files have none)
  std::string captured_at;  // ISO date the prices were read
  std::string source;       // where they came from (a URL)
  std::string price_kind;   // "list" or "marketplace" (empty: list)
  // A file's GPU names that the catalog cannot resolve alone ("A100": four GPUs): name -> catalog id,
  // applied before the catalog's aliases (SkyPilot's A100 on lambda is a100-40gb-sxm4).
  std::map<std::string, std::string> gpu_map;
};
struct ImportResult {
  std::string csv;  // the offers, gpuplan's CSV header first
  size_t offers = 0;
  std::vector<SkippedOffer> skipped;
};
Result<ImportResult> import_offers(const Catalog& catalog, const std::string& file_name, std::string_view text,
                                   const ImportOptions& options);

// Age of `captured_at` in days at `now` (both ISO 8601 dates or date-times); nullopt if unreadable.
std::optional<double> age_days(std::string_view captured_at, std::string_view now);
// Today's date (UTC) as YYYY-MM-DD.
std::string today_iso();

}  // namespace gpuplan

#include "gpuplan/offers.h"
#include "core/text.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <tuple>
#include <utility>

#include "catalog/yaml_util.h"
#include "core/decimal.h"
#include "gpuplan/embedded.h"
#include "gpuplan/units.h"

namespace gpuplan {

namespace {

const char* const kColumns[] = {"provider",     "region",    "offer",       "gpu",        "gpus",
                                "interconnect", "vcpus",     "ram_gb",      "price_hour", "spot_price_hour",
                                "currency",     "available", "captured_at", "source"};
// Columns a file may have or leave out.
const char* const kOptionalColumns[] = {"price_kind",           "fabric",          "billing",
                                        "min_billable_seconds", "startup_seconds", "proxy"};
// The optional columns of an offer's billing terms, fabric and proxy mark (issue #18), which `offers import
// --format csv` carries over when its input has any of them.
const char* const kCarriedColumns[] = {"fabric", "billing", "min_billable_seconds", "startup_seconds", "proxy"};

// Splits CSV text into records of fields (RFC 4180: quotes, doubled quotes, commas and newlines inside
// quotes). Returns each record with the line it starts on.
std::vector<std::pair<int, std::vector<std::string>>> split_csv(std::string_view text) {
  std::vector<std::pair<int, std::vector<std::string>>> out;
  std::vector<std::string> rec;
  std::string field;
  bool quoted = false, any = false;
  int line = 1, start_line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
      any = true;
    } else if (c == ',') {
      rec.push_back(field);
      field.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !field.empty()) {
        rec.push_back(field);
        out.emplace_back(start_line, rec);
      }
      rec.clear();
      field.clear();
      any = false;
      ++line;
      start_line = line;
    } else {
      field += c;
      any = true;
    }
  }
  if (any || !field.empty()) {
    rec.push_back(field);
    out.emplace_back(start_line, rec);
  }
  return out;
}

// Prices per instance-hour: at most a million (the dearest listed 8-GPU instances cost ~100/h); past it
// a figure is a typo or a hostile file, and a product of it with instance counts need not be finite.
constexpr double kMaxPriceHour = 1e6;
// vCPUs of one instance: 65536, 64x the largest cloud instances (~900 vCPUs).
constexpr double kMaxVcpus = 65536;
// RAM of one instance: a petabyte, 30x the largest cloud instances (32 TB).
constexpr double kMaxRamGb = 1e6;
// GPUs of one instance: 1024, the largest plan (PlanOptions::max_gpus); the largest cloud instances
// hold 8 (16 on a few HGX-2 era offers).
constexpr int kMaxInstanceGpus = 1024;
// Instances available: a million, beyond any provider's stock of one offer in one region.
constexpr long long kMaxAvailable = 1'000'000;
// Minimum billed time of one instance: 30 days, past any public provider's minimum (AWS/GCP 60 s,
// Azure 300 s, per-hour billing 3600 s); a larger figure is a reserved-term price, not an offer to plan.
constexpr double kMaxMinBillableSeconds = 30 * kSecondsPerDay;
// Start-up of one instance: a day; a provisioning time longer than that is a typo.
constexpr double kMaxStartupSeconds = kSecondsPerDay;
// Provisioning time of an instance when the offer does not state one: no provider publishes a boot
// time for its GPU instances, so 5 minutes (VM boot with the GPU driver, a container image pull) is a
// stated, conservative default; the column startup_seconds overrides it.
constexpr double kDefaultProvisioningSeconds = 300;

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), the
// encoding the JSON results need: an offer with other bytes is skipped with this reason.
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int extra = 0;
    unsigned min = 0, cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xE0) == 0xC0) {
      extra = 1, min = 0x80, cp = c & 0x1Fu;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, min = 0x800, cp = c & 0x0Fu;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, min = 0x10000, cp = c & 0x07u;
    } else {
      return false;
    }
    if (i + static_cast<size_t>(extra) >= s.size()) return false;  // truncated sequence
    for (int k = 1; k <= extra; ++k) {
      const auto d = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += static_cast<size_t>(extra) + 1;
  }
  return true;
}

// Reads one offer from its fields (already keyed by column name). Returns the reason on failure.
Result<Offer> make_offer(const Catalog& catalog, const std::map<std::string, std::string>& f) {
  auto get = [&](const char* k) {
    auto it = f.find(k);
    return it == f.end() ? std::string() : trim(it->second);
  };
  for (const auto& [key, value] : f) {
    if (!valid_utf8(key) || !valid_utf8(value))
      return invalid_data_error("the line holds bytes that are not UTF-8 (column '" + (valid_utf8(key) ? key : "?") +
                                "'); save the file as UTF-8");
  }
  Offer o;
  o.provider = get("provider");
  o.region = get("region");
  o.name = get("offer");
  if (o.provider.empty() || o.name.empty()) return usage_error("provider and offer are required");
  const std::string gpu = get("gpu");
  auto ref = catalog.resolve(gpu);
  if (!ref) return Error{ref.error().code, "gpu '" + gpu + "': " + ref.error().message, "gpu"};
  o.target = *ref;
  // Decimal numbers only (no hex, inf or nan), from 0 to `max`.
  auto number = [&](const char* k, bool required, double& out, double max) -> Status {
    const std::string s = get(k);
    if (s.empty()) {
      if (required) return usage_error(std::string(k) + " is required");
      return Status::Ok();
    }
    const auto parsed = parse_decimal(s);
    if (!parsed || *parsed < 0) return usage_error(std::string(k) + " '" + s + "' is not a non-negative number");
    if (*parsed > max) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.0f", max);
      return usage_error(std::string(k) + " '" + s + "' is over the bound of " + buf);
    }
    out = *parsed;
    return Status::Ok();
  };
  double gpus = 1, vcpus = 0;
  GPUPLAN_CHECK(number("gpus", true, gpus, kMaxInstanceGpus));
  if (gpus < 1 || gpus != std::floor(gpus) || gpus > kMaxInstanceGpus)
    return usage_error("gpus must be a whole number from 1 to " + std::to_string(kMaxInstanceGpus));
  o.gpus = static_cast<int>(gpus);
  GPUPLAN_CHECK(number("vcpus", false, vcpus, kMaxVcpus));
  o.vcpus = static_cast<int>(vcpus);
  GPUPLAN_CHECK(number("ram_gb", false, o.ram_gb, kMaxRamGb));
  for (auto [key, slot] : {std::pair{"price_hour", &o.price_hour}, std::pair{"spot_price_hour", &o.spot_price_hour}}) {
    if (get(key).empty()) continue;
    double v = 0;
    GPUPLAN_CHECK(number(key, false, v, kMaxPriceHour));
    *slot = v;
  }
  if (!o.price_hour && !o.spot_price_hour) return usage_error("neither price_hour nor spot_price_hour is given");
  const std::string link = get("interconnect");
  if (link == "nvlink")
    o.interconnect = Link::kNvlink;
  else if (link == "pcie" || link.empty())
    o.interconnect = Link::kPcie;
  else
    return usage_error("interconnect '" + link + "' is not nvlink or pcie");
  o.currency = get("currency").empty() ? "USD" : get("currency");
  const std::string avail = get("available");
  if (avail.empty() || avail == "yes" || avail == "true") {
    o.available = true;
  } else if (avail == "no" || avail == "false") {
    o.available = false;
  } else {
    // A count: decimal digits only, at most kMaxAvailable (strtol's long would wrap through an int).
    long long n = 0;
    const bool digits = avail.find_first_not_of("0123456789") == std::string::npos;
    for (size_t i = 0; digits && i < avail.size() && n <= kMaxAvailable; ++i) n = n * 10 + (avail[i] - '0');
    if (!digits) return usage_error("available '" + avail + "' is not yes, no or a count");
    if (n > kMaxAvailable)
      return usage_error("available '" + avail + "' is over the bound of " + std::to_string(kMaxAvailable) +
                         " instances");
    o.available_count = static_cast<int>(n);
    o.available = n > 0;
  }
  o.captured_at = get("captured_at");
  if (!o.captured_at.empty() && !age_days(o.captured_at, o.captured_at)) {
    return usage_error("captured_at '" + o.captured_at + "' is not an ISO 8601 date");
  }
  o.source = get("source");
  const std::string kind = get("price_kind");
  if (kind == "marketplace")
    o.marketplace = true;
  else if (!kind.empty() && kind != "list")
    return usage_error("price_kind '" + kind + "' is not list or marketplace");
  const std::string fabric = get("fabric");
  if (fabric.empty() || fabric == "none")
    o.fabric = Fabric::kNone;
  else if (fabric == "infiniband")
    o.fabric = Fabric::kInfiniband;
  else if (fabric == "roce")
    o.fabric = Fabric::kRoce;
  else if (fabric == "efa")
    o.fabric = Fabric::kEfa;
  else
    return usage_error("fabric '" + fabric + "' is not none, infiniband, roce or efa");
  // Billing terms: the file's columns where given, else the provider's (provider_terms).
  const ProviderTerms terms = provider_terms(o.provider);
  o.billing = terms.billing;
  o.min_billable_seconds = terms.min_billable_seconds;
  o.startup_seconds = terms.startup_seconds;
  o.billing_source = std::string(terms.source);
  const std::string billing = get("billing");
  if (!billing.empty()) {
    if (billing == "per-second")
      o.billing = BillingUnit::kSecond;
    else if (billing == "per-minute")
      o.billing = BillingUnit::kMinute;
    else if (billing == "per-hour")
      o.billing = BillingUnit::kHour;
    else
      return usage_error("billing '" + billing + "' is not per-second, per-minute or per-hour");
  }
  if (!get("min_billable_seconds").empty()) {
    double v = 0;
    GPUPLAN_CHECK(number("min_billable_seconds", false, v, kMaxMinBillableSeconds));
    o.min_billable_seconds = static_cast<int64_t>(std::ceil(v));
  }
  if (!get("startup_seconds").empty())
    GPUPLAN_CHECK(number("startup_seconds", false, o.startup_seconds, kMaxStartupSeconds));
  if (!billing.empty() || !get("min_billable_seconds").empty() || !get("startup_seconds").empty())
    o.billing_source = "offer";
  // A proxy says why it stands in; "no" (or empty) is a real offer of the target.
  if (const std::string proxy = get("proxy"); !proxy.empty() && proxy != "no" && proxy != "false") o.proxy = proxy;
  return o;
}

// Adds the offer read from `fields` to `set`, or its line to the skipped ones with the reason.
void add_offer(const Catalog& catalog, const std::map<std::string, std::string>& fields, const std::string& file,
               int line, OfferSet& set) {
  auto o = make_offer(catalog, fields);
  if (!o) {
    set.skipped.push_back({file, line, o.error().message});
    return;
  }
  o->file = file;
  o->line = line;
  set.offers.push_back(std::move(*o));
}

}  // namespace

std::string_view fabric_name(Fabric f) {
  switch (f) {
    case Fabric::kInfiniband:
      return "infiniband";
    case Fabric::kRoce:
      return "roce";
    case Fabric::kEfa:
      return "efa";
    case Fabric::kNone:
      break;
  }
  return "none";
}

std::string_view billing_name(BillingUnit u) {
  switch (u) {
    case BillingUnit::kMinute:
      return "per-minute";
    case BillingUnit::kHour:
      return "per-hour";
    case BillingUnit::kSecond:
      break;
  }
  return "per-second";
}

int64_t billing_unit_seconds(BillingUnit u) {
  switch (u) {
    case BillingUnit::kMinute:
      return 60;
    case BillingUnit::kHour:
      return 3600;
    case BillingUnit::kSecond:
      break;
  }
  return 1;
}

ProviderTerms provider_terms(std::string_view provider) {
  // Each provider's on-demand billing as its own documentation states it (read 2026-12-02; also in
  // data/offers/README.md). Start-up: none publishes one, so kDefaultProvisioningSeconds for all.
  struct Row {
    std::string_view provider;
    BillingUnit billing;
    int64_t min_seconds;
    std::string_view source;
  };
  static constexpr Row kTerms[] = {
      // "billed on one second increments, with a minimum of 60 seconds" (Linux instances).
      {"aws", BillingUnit::kSecond, 60,
       "https://aws.amazon.com/about-aws/whats-new/2017/10/announcing-amazon-ec2-per-second-billing/"},
      // Per-second billing after a one-minute minimum (Compute Engine pricing page; not re-read 2026-12-02).
      {"gcp", BillingUnit::kSecond, 60, "https://cloud.google.com/compute/vm-instance-pricing"},
      // Per second, a 5-minute minimum from 2025-06-01 (a Microsoft Q&A answer, not a pricing page).
      {"azure", BillingUnit::kSecond, 300,
       "https://learn.microsoft.com/en-us/answers/questions/2259765/"
       "clarification-on-azure-vm-billing-for-short-runtim"},
      // "billed in one-minute increments from the moment you spin up (start) the instance".
      {"lambda", BillingUnit::kMinute, 60, "https://docs.lambdalabs.com/cloud/on-demand-instance-invoicing/"},
      // "All compute and storage charges are billed per second".
      {"runpod", BillingUnit::kSecond, 0, "https://docs.runpod.io/accounts-billing/billing"},
      // On-demand and interruptible: "Per-second billing" (vast.ai's pricing page).
      {"vast", BillingUnit::kSecond, 0, "https://vast.ai/pricing"},
  };
  for (const auto& r : kTerms) {
    if (r.provider == provider)
      return ProviderTerms{r.billing, r.min_seconds, kDefaultProvisioningSeconds, r.source, true};
  }
  // Not verified (cudo, nebius, fluidstack, a user's own provider): bill by the started hour, the
  // coarsest step a cloud uses, so a short job is never planned cheaper than it may cost.
  return ProviderTerms{BillingUnit::kHour, 3600, kDefaultProvisioningSeconds,
                       "default: billing terms not verified for this provider, per-hour with a one-hour minimum",
                       false};
}

double Offer::billed_seconds(double seconds) const {
  const double step = static_cast<double>(billing_unit_seconds(billing));
  // Slack under a step's multiple: 3600.0000001 s from rounding is one hour, not two.
  constexpr double kStepSlack = 1e-9;
  const double rounded = std::ceil(seconds / step - kStepSlack) * step;
  return std::max(rounded, static_cast<double>(min_billable_seconds));
}

std::optional<double> Offer::price_per_gpu_hour(bool spot) const {
  const auto& p = spot ? spot_price_hour : price_hour;
  if (!p) return std::nullopt;
  return *p / gpus;
}

std::string Offer::id() const { return is_market() ? market_id : provider + "/" + region + "/" + name; }

namespace {

// Offer rows in one file or request: public price lists have a few thousand rows (every provider x
// region x shape); each row resolves a GPU name and is matched against every target, so the bound
// keeps offers.list, compare and plan well inside the server's 10 s.
constexpr size_t kMaxOfferRows = 100000;

Error too_many_offer_rows(const std::string& file_name, size_t rows) {
  return limit_error(file_name + ": " + std::to_string(rows) + " offer rows, more than " +
                         std::to_string(kMaxOfferRows) + " (limit kMaxOfferRows); split the file or filter it first",
                     file_name);
}

}  // namespace

Result<OfferSet> parse_offers(const Catalog& catalog, const std::string& file_name, std::string_view text) {
  OfferSet set;
  const bool yaml = file_name.size() >= 5 && (file_name.substr(file_name.size() - 5) == ".yaml" ||
                                              file_name.substr(file_name.size() - 4) == ".yml");
  if (yaml) {
    GPUPLAN_TRY(doc, yaml::parse(file_name, text));
    // A scalar or a list at the top has no `offers:` (operator[] on a scalar throws).
    const YAML::Node offers = doc.IsMap() ? (doc)["offers"] : YAML::Node();
    if (!offers || !offers.IsSequence())
      return invalid_data_error(file_name + ": expected a list under `offers:`", file_name);
    if (offers.size() > kMaxOfferRows) return too_many_offer_rows(file_name, offers.size());
    for (const auto& n : offers) {
      std::map<std::string, std::string> fields;
      const int line = n.Mark().line + 1;
      if (!n.IsMap()) {
        set.skipped.push_back({file_name, line, "expected a mapping of offer keys"});
        continue;
      }
      std::string unknown;
      for (const auto& kv : n) {
        if (!kv.first.IsScalar()) {  // `? [a, b]: c`: as<std::string>() would throw
          unknown = "(a non-scalar key)";
          break;
        }
        const std::string k = kv.first.as<std::string>();
        if (std::find(std::begin(kColumns), std::end(kColumns), k) == std::end(kColumns) &&
            std::find(std::begin(kOptionalColumns), std::end(kOptionalColumns), k) == std::end(kOptionalColumns))
          unknown = valid_utf8(k) ? k : "(not UTF-8)";
        fields[k] = kv.second.IsScalar() ? kv.second.Scalar() : "";
      }
      if (!unknown.empty()) {
        set.skipped.push_back({file_name, line, "unknown key '" + unknown + "'"});
        continue;
      }
      add_offer(catalog, fields, file_name, line, set);
    }
    return set;
  }
  // A UTF-8 byte order mark (spreadsheets write one) is not part of the first column's name.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  auto records = split_csv(text);
  if (records.empty())
    return invalid_data_error(file_name + ": empty offers file; the first line must be the header", file_name);
  if (records.size() - 1 > kMaxOfferRows) return too_many_offer_rows(file_name, records.size() - 1);
  const auto& header = records.front().second;
  std::vector<std::string> cols;
  for (const auto& h : header) {
    if (!valid_utf8(h))
      return invalid_data_error(file_name + ":1: the header holds bytes that are not UTF-8", file_name);
    cols.push_back(trim(h));
  }
  for (const char* required : kColumns) {
    if (std::find(cols.begin(), cols.end(), required) == cols.end()) {
      std::string expected;
      for (const char* c : kColumns) {
        if (!expected.empty()) expected += ',';
        expected += c;
      }
      std::string message = file_name + ":1: the header lacks column '";
      message.append(required).append("'; expected ").append(expected);
      return invalid_data_error(std::move(message), file_name + ": header");
    }
  }
  for (size_t r = 1; r < records.size(); ++r) {
    const auto& [line, rec] = records[r];
    if (rec.size() != cols.size()) {
      set.skipped.push_back(
          {file_name, line,
           std::to_string(rec.size()) + " fields where the header has " + std::to_string(cols.size())});
      continue;
    }
    std::map<std::string, std::string> fields;
    for (size_t i = 0; i < cols.size(); ++i) fields[cols[i]] = rec[i];
    add_offer(catalog, fields, file_name, line, set);
  }
  return set;
}

namespace {

// A field as CSV writes it: quoted when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string out = "\"";
  for (const char c : v) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// One offers CSV line from its fields, in kColumns order and then price_kind (and, with `terms`, the
// billing and fabric columns).
std::string csv_line(const std::map<std::string, std::string>& f, bool terms) {
  std::string line;
  auto put = [&](const char* k) {
    if (!line.empty()) line += ',';
    auto it = f.find(k);
    line += csv_field(it == f.end() ? std::string() : it->second);
  };
  for (const char* c : kColumns) put(c);
  put("price_kind");
  if (terms) {
    for (const char* c : kCarriedColumns) put(c);
  }
  return line + "\n";
}

std::string csv_header(bool terms) {
  std::string h;
  for (const char* c : kColumns) h.append(h.empty() ? "" : ",").append(c);
  h += ",price_kind";
  if (terms) {
    for (const char* c : kCarriedColumns) h.append(",").append(c);
  }
  return h + "\n";
}

// SkyPilot writes counts and sizes as floats ("8.0"); a whole number is written as one ("8").
std::string whole_if_integral(const std::string& s) {
  const auto v = parse_decimal(s);
  if (v && *v == std::floor(*v) && *v < 1e9) return std::to_string(static_cast<long long>(*v));
  return s;
}

// SkyPilot's MemoryGiB as gpuplan's ram_gb (10^9-byte GB, CONTRIBUTING's unit rule), to 0.1 GB as the
// snapshot writes it: 16 GiB is 17.2 GB (the importer used to write 16, 7 % low). Text that is not a number
// in range is passed on as it is, for make_offer to refuse with its bound.
std::string gib_text_as_gb(const std::string& gib) {
  const auto v = parse_decimal(gib);
  if (!v || *v < 0 || *v > kMaxRamGb) return gib;
  constexpr double kTenths = 10;  // one decimal
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", std::round(*v * kBytesPerGib / kBytesPerGb * kTenths) / kTenths);
  return buf;
}

// Two prices added ("0.14679" + "0.56004" = "0.70683"): a host machine's and its GPUs'. Empty when either is
// empty or not a number; 10 significant digits, so the sum of two 5-decimal prices prints without binary noise.
std::string price_sum(const std::string& a, const std::string& b) {
  const auto x = parse_decimal(a), y = parse_decimal(b);
  if (!x || !y || *x < 0 || *y < 0 || *x > kMaxPriceHour || *y > kMaxPriceHour) return {};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", *x + *y);
  return buf;
}

// A machine type whose GPUs the price list prices in rows of their own (data/offers/host_gpus.yaml).
struct HostGpus {
  std::string accelerator;  // the GPU rows' AcceleratorName ("L4")
  std::string count;        // their AcceleratorCount, as whole_if_integral writes it ("1")
};
// Machine types of `provider` whose GPU rows are joined to them (empty: none listed, or the file unreadable).
std::map<std::string, HostGpus> host_gpus(const std::string& provider) {
  constexpr std::string_view kHostGpusFile = "data/offers/host_gpus.yaml";
  std::map<std::string, HostGpus> out;
  for (const auto& f : embedded_files()) {
    if (f.path != kHostGpusFile) continue;
    auto doc = yaml::parse(std::string(f.path), f.contents);
    if (!doc || !doc->IsMap()) break;
    const YAML::Node hosts = (*doc)["hosts"];
    if (!hosts || !hosts.IsMap() || !hosts[provider] || !hosts[provider].IsMap()) break;
    for (const auto& kv : hosts[provider]) {
      if (!kv.first.IsScalar() || !kv.second.IsMap() || !kv.second["accelerator"] || !kv.second["count"] ||
          !kv.second["accelerator"].IsScalar() || !kv.second["count"].IsScalar())
        continue;
      out[kv.first.Scalar()] = {kv.second["accelerator"].Scalar(), whole_if_integral(kv.second["count"].Scalar())};
    }
  }
  return out;
}

}  // namespace

Result<ImportResult> import_offers(const Catalog& catalog, const std::string& file_name, std::string_view text,
                                   const ImportOptions& options) {
  if (options.format != "skypilot" && options.format != "csv")
    return usage_error("format '" + options.format + "' is not skypilot or csv", "format");
  if (options.captured_at.empty() || !age_days(options.captured_at, options.captured_at))
    return usage_error("captured_at must be the ISO date the prices were read (2026-12-01)", "captured_at");
  if (options.source.empty()) return usage_error("source must say where the prices come from (a URL)", "source");
  if (!options.price_kind.empty() && options.price_kind != "list" && options.price_kind != "marketplace")
    return usage_error("price_kind '" + options.price_kind + "' is not list or marketplace", "price_kind");
  ImportResult out;
  bool terms = false;  // set once the header is read: whether the billing and fabric columns go out
  auto emit = [&](std::map<std::string, std::string> f, int line) {
    if (f["captured_at"].empty()) f["captured_at"] = options.captured_at;
    if (f["source"].empty()) f["source"] = options.source;
    if (f["price_kind"].empty()) f["price_kind"] = options.price_kind.empty() ? "list" : options.price_kind;
    if (auto m = options.gpu_map.find(f["gpu"]); m != options.gpu_map.end()) f["gpu"] = m->second;
    auto o = make_offer(catalog, f);  // the row as parse_offers would read it
    if (!o) {
      out.skipped.push_back({file_name, line, o.error().message});
      return;
    }
    f["gpu"] = o->target.id();
    out.csv += csv_line(f, terms);
    ++out.offers;
  };
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  auto records = split_csv(text);
  if (records.empty())
    return invalid_data_error(file_name + ": empty file; the first line must be the header", file_name);
  if (records.size() - 1 > kMaxOfferRows) return too_many_offer_rows(file_name, records.size() - 1);
  std::vector<std::string> cols;
  for (const auto& h : records.front().second) {
    if (!valid_utf8(h))
      return invalid_data_error(file_name + ":1: the header holds bytes that are not UTF-8", file_name);
    cols.push_back(trim(h));
  }
  for (const char* c : kCarriedColumns)
    terms = terms || (options.format == "csv" && std::find(cols.begin(), cols.end(), c) != cols.end());
  out.csv = csv_header(terms);
  const char* const* required = kColumns;
  size_t required_n = std::size(kColumns);
  static const char* const kSkyPilotColumns[] = {
      "InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB", "Price", "Region"};
  if (options.format == "skypilot") {
    if (options.provider.empty())
      return usage_error("provider is required: SkyPilot's files have no provider column", "provider");
    required = kSkyPilotColumns;
    required_n = std::size(kSkyPilotColumns);
  }
  for (size_t i = 0; i < required_n; ++i) {
    if (std::find(cols.begin(), cols.end(), required[i]) == cols.end())
      return invalid_data_error(
          file_name + ":1: the header lacks column '" + required[i] + "' (format " + options.format + ")",
          file_name + ": header");
  }
  // SkyPilot lists an instance once per availability zone: one offer per (instance type, region), its
  // spot price the lowest of the zones' (each zone is a place to ask; on-demand is the same in all).
  std::map<std::pair<std::string, std::string>, std::pair<int, std::map<std::string, std::string>>> by_region;
  std::vector<std::pair<std::string, std::string>> order;
  // GCP's layout (issue #18): a G2 machine's row has no accelerator and prices the host only; its GPUs are
  // rows with an empty InstanceType, priced per zone. Those rows are read first (they come last in the file),
  // keyed by (AcceleratorName, AcceleratorCount, zone or else region), and a listed machine type gets the
  // sum of its row and theirs in the same zone, as SkyPilot's optimizer adds them.
  const std::map<std::string, HostGpus> hosts =
      options.format == "skypilot" ? host_gpus(options.provider) : std::map<std::string, HostGpus>();
  using GpuRowKey = std::tuple<std::string, std::string, std::string>;
  std::map<GpuRowKey, std::pair<std::string, std::string>> gpu_rows;  // -> (Price, SpotPrice)
  const bool zoned = std::find(cols.begin(), cols.end(), "AvailabilityZone") != cols.end();
  auto place_of = [&](const std::vector<std::string>& rec, const char* col) {
    const auto it = std::find(cols.begin(), cols.end(), col);
    return it == cols.end() ? std::string() : trim(rec[static_cast<size_t>(it - cols.begin())]);
  };
  if (!hosts.empty()) {
    for (size_t r = 1; r < records.size(); ++r) {
      const auto& rec = records[r].second;
      if (rec.size() != cols.size() || !place_of(rec, "InstanceType").empty()) continue;
      const std::string name = place_of(rec, "AcceleratorName");
      if (name.empty()) continue;
      gpu_rows[{name, whole_if_integral(place_of(rec, "AcceleratorCount")),
                place_of(rec, zoned ? "AvailabilityZone" : "Region")}] = {place_of(rec, "Price"),
                                                                          place_of(rec, "SpotPrice")};
    }
  }
  for (size_t r = 1; r < records.size(); ++r) {
    const auto& [line, rec] = records[r];
    if (rec.size() != cols.size()) {
      out.skipped.push_back(
          {file_name, line,
           std::to_string(rec.size()) + " fields where the header has " + std::to_string(cols.size())});
      continue;
    }
    std::map<std::string, std::string> in;
    for (size_t i = 0; i < cols.size(); ++i) in[cols[i]] = trim(rec[i]);
    if (options.format == "csv") {
      emit(std::move(in), line);
      continue;
    }
    if (in["InstanceType"].empty() && !in["AcceleratorName"].empty() && !hosts.empty())
      continue;  // a GPU row of the GCP layout: joined to its host machines above, not an offer by itself
    if (in["AcceleratorName"].empty()) {
      const auto host = hosts.find(in["InstanceType"]);
      if (host == hosts.end()) continue;  // a CPU-only instance: not an offer of a GPU
      const std::string place = zoned ? in["AvailabilityZone"] : in["Region"];
      const auto gpu = gpu_rows.find({host->second.accelerator, host->second.count, place});
      const std::string price = gpu == gpu_rows.end() ? std::string() : price_sum(in["Price"], gpu->second.first);
      if (price.empty()) {
        out.skipped.push_back({file_name, line,
                               in["InstanceType"] + " in " + place + ": no price for its " + host->second.count + " " +
                                   host->second.accelerator + " GPU(s) in the same " + (zoned ? "zone" : "region") +
                                   " (the file prices a " + in["InstanceType"] +
                                   "'s GPUs in rows with an empty InstanceType)"});
        continue;
      }
      in["AcceleratorName"] = host->second.accelerator;
      in["AcceleratorCount"] = host->second.count;
      in["Price"] = price;
      in["SpotPrice"] = price_sum(in["SpotPrice"], gpu->second.second);  // empty unless both sell spot
    }
    const auto count = parse_decimal(in["AcceleratorCount"]);
    if (count && *count > 0 && *count < 1) {
      out.skipped.push_back({file_name, line,
                             "AcceleratorCount " + in["AcceleratorCount"] +
                                 ": a fractional GPU (a share of one device) is not an offer of whole devices"});
      continue;
    }
    std::map<std::string, std::string> f{{"provider", options.provider},
                                         {"region", in["Region"]},
                                         {"offer", in["InstanceType"]},
                                         {"gpu", in["AcceleratorName"]},
                                         {"gpus", whole_if_integral(in["AcceleratorCount"])},
                                         {"interconnect", "pcie"},
                                         {"vcpus", whole_if_integral(in["vCPUs"])},
                                         {"ram_gb", gib_text_as_gb(in["MemoryGiB"])},
                                         {"price_hour", in["Price"]},
                                         {"spot_price_hour", in["SpotPrice"]},
                                         {"currency", "USD"},
                                         {"available", "yes"}};
    const auto key = std::make_pair(f["offer"], f["region"]);
    auto it = by_region.find(key);
    if (it == by_region.end()) {
      by_region.emplace(key, std::make_pair(line, std::move(f)));
      order.push_back(key);
      continue;
    }
    auto& kept = it->second.second;
    const auto a = parse_decimal(kept["spot_price_hour"]), b = parse_decimal(f["spot_price_hour"]);
    if (b && (!a || *b < *a)) kept["spot_price_hour"] = f["spot_price_hour"];
    if (kept["price_hour"].empty()) kept["price_hour"] = f["price_hour"];
  }
  for (const auto& key : order) {
    auto& [line, f] = by_region[key];
    emit(f, line);
  }
  return out;
}

Result<OfferSet> default_offers(const Catalog& catalog) {
  OfferSet all;
  for (const auto& f : embedded_files()) {
    if (f.path.rfind("data/offers/", 0) != 0 || f.path.size() < 4 || f.path.substr(f.path.size() - 4) != ".csv")
      continue;
    GPUPLAN_TRY(set, parse_offers(catalog, std::string(f.path), f.contents));
    all.offers.insert(all.offers.end(), set.offers.begin(), set.offers.end());
    all.skipped.insert(all.skipped.end(), set.skipped.begin(), set.skipped.end());
  }
  return all;
}

namespace {
// Days since 1970-01-01 for a civil date, plus the fraction of the day. The literals are those of
// Howard Hinnant's days_from_civil (https://howardhinnant.github.io/date_algorithms.html): 400-year
// eras of 146097 days, March-based years (153 days per 5 months), 719468 days from 0000-03-01 to 1970-01-01.
std::optional<double> parse_iso_days(std::string_view s) {
  int y = 0, m = 0, d = 0, hh = 0, mm = 0, ss = 0;
  const std::string str(s);
  const int n = std::sscanf(str.c_str(), "%4d-%2d-%2d%*1[T ]%2d:%2d:%2d", &y, &m, &d, &hh, &mm, &ss);
  if (n < 3 || m < 1 || m > 12 || d < 1 || d > 31) return std::nullopt;
  y -= m <= 2;
  const int era = (y >= 0 ? y : y - 399) / 400;
  const int yoe = y - era * 400;
  const int doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const double days = era * 146097.0 + doe - 719468.0;
  return days + (hh * kSecondsPerHour + mm * kSecondsPerMinute + ss) / kSecondsPerDay;
}
}  // namespace

std::optional<double> age_days(std::string_view captured_at, std::string_view now) {
  auto a = parse_iso_days(captured_at), b = parse_iso_days(now);
  if (!a || !b) return std::nullopt;
  return *b - *a;
}

std::string today_iso() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

}  // namespace gpuplan

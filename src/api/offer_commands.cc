// offers.list: the offers a plan chooses from, with per-GPU prices and staleness.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "api/commands.h"
#include "api/offer_request.h"
#include "core/request.h"
#include "gpuplan/perf.h"

namespace gpuplan::api {

namespace {
Json price_json(const std::optional<double>& v) {
  if (!v) return nullptr;
  return std::round(*v * 1e4) / 1e4;
}
}  // namespace

bool is_offer_key(std::string_view key) {
  // The offers group of data/options.yaml.
  static const std::vector<std::string_view> keys = [] {
    auto table = option_table();
    return table ? (*table)->group_keys("offers") : std::vector<std::string_view>{};
  }();
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

namespace {

// Market rows in one request: one snapshot of the market's live offers, which lists at most 10,000
// rows per call (market.h kMaxListRows); a hand-written request gets the same bound.
constexpr size_t kMaxMarketOfferRows = 10'000;
// GPUs of one market rental unit: they sit on one node, and a node holds at most 16 (market.h
// kMaxGpusPerNode).
constexpr int64_t kMaxMarketOfferGpus = 16;
// Instances a market row may say are free: a million, as for offers files (offers.cc kMaxAvailable).
constexpr int64_t kMaxMarketAvailable = 1'000'000;
// Price per rental unit and hour: a million, as for offers files (offers.cc kMaxPriceHour).
constexpr double kMaxMarketPriceHour = 1e6;
// Bytes of a market row's id, provider or region: the market's own bound (market.h kMaxNameBytes).
constexpr size_t kMaxMarketNameBytes = 128;
// A market row's measured figures (market_routes.cc measured_json: ten short fields, ~400 bytes) and its
// efficiency text (five key=value pairs, ~100 bytes), with room to spare.
constexpr size_t kMaxMeasuredJsonBytes = 4096;
constexpr size_t kMaxMeasuredTextBytes = 512;
// The file name market rows are reported under (skipped lines, `file`).
constexpr const char* kMarketSource = "market";

// One market row, as GET /offers?source=market lists it ({id, provider, region, target, gpus,
// price_per_hour, available} and optionally demo, min_billable_seconds, interconnect, currency), read
// into the offer row plan and compare rank. The reason, naming the key, when it is malformed.
Result<Offer> market_offer(const Catalog& catalog, const Json& row) {
  if (!row.is_object()) return usage_error("a market offer must be an object");
  auto text = [&](const char* key, bool required, std::string& out) -> Status {
    if (!row.contains(key) || row[key].is_null()) {
      if (required) return usage_error(std::string("'") + key + "' is required");
      return Status::Ok();
    }
    if (!row[key].is_string()) return usage_error(std::string("'") + key + "' must be a string");
    out = row[key].get<std::string>();
    if (out.size() > kMaxMarketNameBytes)
      return usage_error(std::string("'") + key + "' is longer than " + std::to_string(kMaxMarketNameBytes) + " bytes");
    if (required && out.empty()) return usage_error(std::string("'") + key + "' is empty");
    return Status::Ok();
  };
  auto whole = [&](const char* key, int64_t lo, int64_t hi, int64_t& out) -> Status {
    if (!row.contains(key) || !row[key].is_number_integer())
      return usage_error(std::string("'") + key + "' must be a whole number");
    const Json& v = row[key];
    // The parser stores a non-negative integer as unsigned: compare it as one (lo and hi are >= 0).
    const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() >= static_cast<uint64_t>(lo) &&
                                                       v.get<uint64_t>() <= static_cast<uint64_t>(hi)
                                                 : v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
    if (!in_range)
      return usage_error(std::string("'") + key + "' is outside [" + std::to_string(lo) + ", " + std::to_string(hi) +
                         "]");
    out = v.get<int64_t>();
    return Status::Ok();
  };
  Offer o;
  GPUPLAN_CHECK(text("id", true, o.market_id));
  GPUPLAN_CHECK(text("provider", true, o.provider));
  GPUPLAN_CHECK(text("region", false, o.region));
  std::string target;
  GPUPLAN_CHECK(text("target", true, target));
  auto ref = catalog.resolve(target);
  if (!ref) return Error{ref.error().code, "target '" + target + "': " + ref.error().message, "target"};
  o.target = *ref;
  o.name = o.market_id;
  int64_t gpus = 1, available = 0;
  if (row.contains("gpus")) GPUPLAN_CHECK(whole("gpus", 1, kMaxMarketOfferGpus, gpus));
  o.gpus = static_cast<int>(gpus);
  GPUPLAN_CHECK(whole("available", 0, kMaxMarketAvailable, available));
  o.available_count = static_cast<int>(available);
  o.available = available > 0;
  if (!row.contains("price_per_hour") || !row["price_per_hour"].is_number())
    return usage_error("'price_per_hour' must be a number");
  const double price = row["price_per_hour"].get<double>();
  if (!std::isfinite(price) || price <= 0 || price > kMaxMarketPriceHour)
    return usage_error("'price_per_hour' must be above 0 and at most " +
                       std::to_string(static_cast<long long>(kMaxMarketPriceHour)));
  o.price_hour = price;
  if (row.contains("min_billable_seconds")) {
    GPUPLAN_CHECK(whole("min_billable_seconds", 0, std::numeric_limits<int32_t>::max(), o.min_billable_seconds));
  }
  if (row.contains("demo")) {
    if (!row["demo"].is_boolean()) return usage_error("'demo' must be true or false");
    o.demo = row["demo"].get<bool>();
  }
  std::string link;
  GPUPLAN_CHECK(text("interconnect", false, link));
  if (link == "nvlink")
    o.interconnect = Link::kNvlink;
  else if (link.empty() || link == "pcie")
    o.interconnect = Link::kPcie;  // the market places multi-GPU units on NVLink first, not only
  else
    return usage_error("'interconnect' '" + link + "' is not nvlink or pcie");
  GPUPLAN_CHECK(text("currency", false, o.currency));
  if (o.currency.empty()) o.currency = "USD";
  // What the GPUs behind it measured (PUT /agent/bench): kept as the market wrote it, and its fitted
  // curves as `--efficiency` text for plan (a malformed one is the row's reason).
  if (row.contains("measured") && !row["measured"].is_null()) {
    const Json& m = row["measured"];
    if (!m.is_object()) return usage_error("'measured' must be an object (the market's measured figures)");
    if (m.contains("efficiency") && !m["efficiency"].is_null()) {
      if (!m["efficiency"].is_string() || m["efficiency"].get_ref<const std::string&>().size() > kMaxMeasuredTextBytes)
        return usage_error("'measured.efficiency' must be --efficiency text of at most " +
                           std::to_string(kMaxMeasuredTextBytes) + " bytes");
      o.measured_efficiency = m["efficiency"].get<std::string>();
      if (!o.measured_efficiency.empty()) {
        auto e = parse_efficiency(o.measured_efficiency, default_efficiency());
        if (!e) return usage_error("'measured.efficiency': " + e.error().message);
      }
    }
    o.measured_json = m.dump(-1, ' ', false, Json::error_handler_t::replace);
    if (o.measured_json.size() > kMaxMeasuredJsonBytes)
      return usage_error("'measured' is over " + std::to_string(kMaxMeasuredJsonBytes) + " bytes");
  }
  o.source = kMarketSource;
  o.file = kMarketSource;
  return o;
}

// The market rows of `market` ({"offers": [...]}, the market's own answer) into `set`; a malformed row
// is skipped with its reason, as a file's line is.
Status add_market_offers(const Catalog& catalog, const Json& market, OfferSet& set) {
  if (!market.is_object() || !market.contains("offers") || !market["offers"].is_array())
    return usage_error("'market' must be the market's offers list: {\"offers\": [...]}", "market");
  const Json& rows = market["offers"];
  if (rows.size() > kMaxMarketOfferRows) {
    return limit_error("'market' holds " + std::to_string(rows.size()) + " offers, more than " +
                           std::to_string(kMaxMarketOfferRows) + " (limit kMaxMarketOfferRows); filter them first",
                       "market");
  }
  int line = 0;
  for (const auto& row : rows) {
    ++line;
    auto o = market_offer(catalog, row);
    if (!o) {
      set.skipped.push_back({kMarketSource, line, o.error().message});
      continue;
    }
    o->line = line;
    set.offers.push_back(std::move(*o));
  }
  return Status::Ok();
}

// The offers files of the request: `offers` (a list of {name, text} files, which the CLI reads and
// the server receives inline, or one CSV/YAML text), else the shipped snapshot.
Result<OfferSet> file_offers(const Context& ctx, const Request& req) {
  OfferSet all;
  if (!req.has("offers")) {
    auto set = default_offers(*ctx.catalog);
    if (!set) return set.error();
    return std::move(*set);
  }
  const Json& o = req.raw("offers");
  std::vector<std::pair<std::string, std::string>> files;
  if (o.is_string()) {
    files.emplace_back("offers.csv", o.get<std::string>());
  } else if (o.is_array()) {
    for (const auto& f : o) {
      if (f.is_object() && f.contains("text") && f["text"].is_string()) {
        // value("name", ...) would throw on a name that is not a string.
        if (f.contains("name") && !f["name"].is_string())
          return usage_error("'offers' file 'name' must be a string", "offers");
        files.emplace_back(f.contains("name") ? f["name"].get<std::string>() : "offers.csv",
                           f["text"].get<std::string>());
      } else if (f.is_string()) {
        files.emplace_back("offers.csv", f.get<std::string>());
      } else {
        return usage_error("'offers' must be CSV text or a list of {name, text} files", "offers");
      }
    }
  } else {
    return usage_error("'offers' must be CSV text or a list of {name, text} files", "offers");
  }
  for (const auto& [name, text] : files) {
    auto set = parse_offers(*ctx.catalog, name, text);
    if (!set) return set.error();
    all.offers.insert(all.offers.end(), set->offers.begin(), set->offers.end());
    all.skipped.insert(all.skipped.end(), set->skipped.begin(), set->skipped.end());
  }
  return all;
}

}  // namespace

Result<OfferSet> offers_from_request(const Context& ctx, const Request& req) {
  // `source`: all (files and market rows), files, or market (data/options.yaml checks the word).
  GPUPLAN_TRY(source, req.text("source"));
  OfferSet all;
  if (source != "market") {
    auto files = file_offers(ctx, req);
    if (!files) return files.error();
    all = std::move(*files);
  }
  if (source != "files" && req.has("market")) GPUPLAN_CHECK(add_market_offers(*ctx.catalog, req.raw("market"), all));
  return all;
}

Result<OfferFilter> offer_filter_from_request(const Request& req) {
  OfferFilter f;
  auto providers = req.words("provider");
  auto regions = req.words("region");
  auto spot = req.boolean("spot");
  auto max_age = req.real("max_age", kDefaultMaxOfferAgeDays);
  auto now = req.string("now", today_iso());  // the declared `now` has no default: it is today
  if (!providers) return providers.error();
  if (!regions) return regions.error();
  if (!spot) return spot.error();
  if (!max_age) return max_age.error();
  if (!now) return now.error();
  if (!age_days(*now, *now)) return usage_error("'now' must be an ISO 8601 date", "now");
  f.providers = *providers;
  f.regions = *regions;
  f.spot = *spot;
  f.max_age_days = *max_age;
  f.max_age_given = req.has("max_age");
  f.now = *now;
  return f;
}

std::string offer_rejection(const Offer& o, const OfferFilter& f) {
  auto listed = [](const std::vector<std::string>& list, const std::string& v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  if (!listed(f.providers, o.provider)) return "provider not selected";
  if (!listed(f.regions, o.region)) return "region not selected";
  if (!o.price_per_gpu_hour(f.spot)) return f.spot ? "not sold as spot" : "not sold on demand";
  if (!o.available) return "unavailable";
  const auto age = o.is_market() ? std::nullopt : age_days(o.captured_at, f.now);
  if (age && *age > f.max_age_days && (f.max_age_given || o.marketplace)) {
    return "stale: price captured " + o.captured_at + ", older than " +
           std::to_string(static_cast<int>(f.max_age_days)) + " days";
  }
  if (age && o.marketplace && !f.max_age_given && *age > kMarketplaceMaxAgeDays) {
    return "stale: marketplace price captured " + o.captured_at + ", older than " +
           std::to_string(static_cast<int>(kMarketplaceMaxAgeDays)) +
           " days (marketplace asks move hourly; --max-age DAYS uses it anyway)";
  }
  return {};
}

std::string price_age_warning(const Offer& o, const OfferFilter& f) {
  if (o.is_market()) return {};
  const auto age = age_days(o.captured_at, f.now);
  if (!age || *age <= f.max_age_days) return {};
  return "list price from " + o.captured_at.substr(0, 7) + ", may be stale (" +
         std::to_string(static_cast<long long>(std::floor(*age))) + " days old)";
}

Json offer_json(const Offer& o, const OfferFilter& f) {
  Json j{{"offer", o.id()},
         {"provider", o.provider},
         {"region", o.region},
         {"name", o.name},
         {"target", o.target.id()},
         {"gpus", o.gpus},
         {"interconnect", o.interconnect == Link::kNvlink ? "nvlink" : "pcie"},
         {"vcpus", o.vcpus},
         {"ram_gb", o.ram_gb},
         {"price_hour", price_json(o.price_hour)},
         {"spot_price_hour", price_json(o.spot_price_hour)},
         {"price_per_gpu_hour", price_json(o.price_per_gpu_hour(false))},
         {"spot_price_per_gpu_hour", price_json(o.price_per_gpu_hour(true))},
         {"currency", o.currency},
         {"available", o.available_count ? Json(*o.available_count) : Json(o.available)},
         {"captured_at", o.captured_at},
         {"source", o.source}};
  if (o.is_market()) {
    // The market's own keys (GET /offers?source=market), so a client reads either list alike; the id
    // first, as the market's list has it.
    Json with_id{{"id", o.market_id}};
    with_id.update(j);
    j = std::move(with_id);
    j["price_per_hour"] = price_json(o.price_hour);
    j["min_billable_seconds"] = o.min_billable_seconds;
    j["demo"] = o.demo;
    j["measured"] = o.measured_json.empty() ? Json(nullptr) : Json::parse(o.measured_json, nullptr, false);
  }
  auto age = age_days(o.captured_at, f.now);
  j["age_days"] = age ? Json(std::round(*age)) : Json(nullptr);
  j["stale"] = age && *age > f.max_age_days;
  if (const std::string w = price_age_warning(o, f); !w.empty()) j["price_warning"] = w;
  if (o.is_proxy()) {  // a stand-in priced from another product (issue #18)
    j["proxy"] = true;
    j["proxy_reason"] = o.proxy;
  }
  return j;
}

namespace {

Result<Json> offers_list(const Context& ctx, const Json& body) {
  Request req(body, "offers.list");
  GPUPLAN_CHECK(req.check_keys());
  auto set = offers_from_request(ctx, req);
  if (!set) return set.error();
  auto filter = offer_filter_from_request(req);
  if (!filter) return filter.error();
  auto gpus = req.words("gpu");
  auto all = req.boolean("all");
  if (!gpus) return gpus.error();
  if (!all) return all.error();
  std::vector<std::string> gpu_ids;
  for (const auto& g : *gpus) {
    auto ref = ctx.catalog->resolve(g);
    if (!ref) return ref.error();
    gpu_ids.push_back(ref->id());
  }
  std::vector<const Offer*> kept;
  Json rejected = Json::array();
  for (const auto& o : set->offers) {
    if (!gpu_ids.empty() && std::find(gpu_ids.begin(), gpu_ids.end(), o.target.id()) == gpu_ids.end()) continue;
    const std::string why = offer_rejection(o, *filter);
    if (why.empty() || *all) kept.push_back(&o);
    if (!why.empty()) rejected.push_back(Json{{"offer", o.id()}, {"reason", why}});
  }
  std::stable_sort(kept.begin(), kept.end(), [&](const Offer* a, const Offer* b) {
    return a->price_per_gpu_hour(filter->spot).value_or(1e300) < b->price_per_gpu_hour(filter->spot).value_or(1e300);
  });
  Json offers = Json::array();
  for (const Offer* o : kept) offers.push_back(offer_json(*o, *filter));
  Json skipped = Json::array();
  for (const auto& s : set->skipped) skipped.push_back(Json{{"file", s.file}, {"line", s.line}, {"reason", s.reason}});
  return Json{{"now", filter->now},          {"max_age_days", filter->max_age_days}, {"spot", filter->spot},
              {"offers", std::move(offers)}, {"rejected", std::move(rejected)},      {"skipped", std::move(skipped)}};
}

}  // namespace

void register_offer_commands(CommandTable& table) {
  table.push_back({"offers.list", "List offers, cheapest per GPU-hour first", offers_list});
}

}  // namespace gpuplan::api

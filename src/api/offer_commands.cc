// offers.list: the offers a plan chooses from, with per-GPU prices and staleness.
#include <algorithm>
#include <cmath>

#include "api/commands.h"
#include "api/offer_request.h"
#include "core/request.h"

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

Result<OfferSet> offers_from_request(const Context& ctx, const Request& req) {
  OfferSet all;
  if (!req.has("offers")) {
    auto set = default_offers(*ctx.catalog);
    if (!set) return set.error();
    return std::move(*set);
  }
  // `offers`: a list of {name, text} files (the CLI reads them; the server receives them inline), or
  // one CSV/YAML text.
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
  if (auto age = age_days(o.captured_at, f.now); age && *age > f.max_age_days) {
    return "stale: price captured " + o.captured_at + ", older than " +
           std::to_string(static_cast<int>(f.max_age_days)) + " days";
  }
  return {};
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
  auto age = age_days(o.captured_at, f.now);
  j["age_days"] = age ? Json(std::round(*age)) : Json(nullptr);
  j["stale"] = age && *age > f.max_age_days;
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

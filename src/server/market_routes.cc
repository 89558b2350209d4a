// The market's HTTP endpoints (see market_routes.h): request JSON -> one Market call -> answer JSON.
#include "server/market_routes.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

#include "core/decimal.h"
#include "core/format.h"
#include "core/request.h"
#include "server/agent_routes.h"
#include "server/server.h"

namespace gpuplan::server {

HttpResponse market_json_answer(int status, const Json& body) {
  HttpResponse res;
  res.status = status;
  res.body = body.dump(-1, ' ', false, Json::error_handler_t::replace);
  res.headers.emplace_back("Cache-Control", "no-store");
  return res;
}

HttpResponse market_error_answer(const Error& e) {
  HttpResponse res = market_json_answer(http_status(e.code), error_json(e));
  if (e.code == ErrorCode::kUnauthenticated) res.headers.emplace_back("WWW-Authenticate", "Bearer");
  if (e.code == ErrorCode::kUnavailable) res.headers.emplace_back("Retry-After", "1");
  return res;
}

namespace {

using market::Market;
using market::Principal;

// Micro-units of the currency in one unit: prices travel as dollars per hour in JSON (0.35) and are
// integers of micro-dollars in the store.
constexpr double kMicrosPerUnit = 1e6;
constexpr int64_t kMillisPerHour = 3'600'000;

Json j_opt(const std::optional<int64_t>& v) { return v ? Json(*v) : Json(nullptr); }
Json j_str_or_null(const std::string& s) { return s.empty() ? Json(nullptr) : Json(s); }
double money(int64_t micros) { return static_cast<double>(micros) / kMicrosPerUnit; }

template <typename T>
HttpResponse answer(const Result<T>& r, int status, Json (*to_json)(const T&)) {
  if (!r) return market_error_answer(r.error());
  return market_json_answer(status, to_json(*r));
}

// --- JSON of the market's objects ---------------------------------------------------------------------------
Json tenant_json(const market::Tenant& t) {
  return Json{{"id", t.id},
              {"name", t.name},
              {"kind", market::to_string(t.kind)},
              {"credit_limit", j_opt(t.credit_limit_micros)},
              {"created_at_ms", t.created_at_ms}};
}
Json user_json(const market::User& u) {
  return Json{{"id", u.id}, {"tenant_id", u.tenant_id}, {"name", u.name}, {"role", market::to_string(u.role)}};
}
Json token_json(const market::IssuedToken& t) {
  return Json{{"id", t.id},
              {"token", t.token},
              {"user_id", t.user_id},
              {"tenant_id", t.tenant_id},
              {"scope", market::to_string(t.scope)},
              {"expires_at_ms", j_opt(t.expires_at_ms)}};
}
Json node_json(const market::Node& n) {
  Json gpus = Json::array();
  for (const auto& g : n.gpus) {
    gpus.push_back(Json{{"id", g.id},
                        {"index", g.index},
                        {"uuid", g.uuid},
                        {"target", g.catalog_id},
                        {"mig", market::to_string(g.mig)},
                        {"layout", j_str_or_null(g.layout)},
                        {"memory_slices", g.memory_slices},
                        {"claimed_slices", g.claimed_slices}});
  }
  return Json{{"id", n.id},
              {"name", n.name},
              {"region", n.region},
              {"interconnect", market::to_string(n.interconnect)},
              {"vcpus", n.vcpus},
              {"ram_gb", n.ram_gb},
              {"disk_gb", n.disk_gb},
              {"state", market::to_string(n.state)},
              {"scheduler", market::to_string(n.scheduler)},
              {"slurm_partition", j_str_or_null(n.slurm_partition)},
              {"slurm_node", j_str_or_null(n.slurm_node)},
              {"ssh", j_str_or_null(n.ssh)},
              {"mig_policy", market::to_string(n.mig_policy)},
              {"live_rentals", n.live_rentals},
              {"gpus", std::move(gpus)},
              {"created_at_ms", n.created_at_ms}};
}
// GET /rentals/{id}/access: how the renter reaches what it rented (issue #15).
Json access_json(const market::RentalAccess& a) {
  return Json{
      {"rental_id", a.rental_id},
      {"state", market::to_string(a.state)},
      {"kind", a.access.kind},
      {"node", j_str_or_null(a.node_name)},
      {"generation", a.generation},
      {"external_id", j_str_or_null(a.access.external_id)},
      {"command", j_str_or_null(a.access.command)},
      {"ssh", j_str_or_null(a.access.ssh)},
      {"namespace", j_str_or_null(a.access.kube_namespace)},
      {"pod", j_str_or_null(a.access.pod)},
      {"server", j_str_or_null(a.access.server)},
      // A fresh namespace-scoped token at each call; gpuplan keeps no copy.
      {"token", j_str_or_null(a.access.token)},
      {"token_expires_in_seconds", a.access.token.empty() ? Json(nullptr) : Json(a.access.token_expires_in_seconds)},
      {"note", j_str_or_null(a.access.note)}};
}
}  // namespace

Json measured_json(const market::OfferMeasured& m) {
  auto positive = [](double v) { return v > 0 ? Json(sig(v)) : Json(nullptr); };
  return Json{{"bf16_dense_tflops", positive(m.bf16_dense_tflops)},
              {"ratio_to_datasheet", positive(m.ratio_to_datasheet)},
              {"memory_gbps", positive(m.memory_gbps)},
              {"ratio", positive(m.ratio)},
              {"pcie_gen", m.pcie_gen > 0 ? Json(m.pcie_gen) : Json(nullptr)},
              {"pcie_width", m.pcie_width > 0 ? Json(m.pcie_width) : Json(nullptr)},
              {"measured_at", m.measured_at},
              {"method", m.method},
              {"efficiency", m.efficiency},
              {"gpus_measured", m.gpus_measured}};
}

namespace {

Json offer_json(const market::Offer& o) {
  return Json{{"id", o.id},
              {"source", "market"},
              {"provider", o.provider},
              {"provider_id", o.provider_id},
              {"region", o.region},
              {"target", o.target},
              {"gpu", o.gpu},
              {"profile", j_str_or_null(o.profile)},
              {"gpus", o.gpus},
              {"price_per_hour", money(o.price_micros_per_hour)},
              {"price_micros_per_hour", o.price_micros_per_hour},
              {"min_billable_seconds", o.min_billable_seconds},
              {"available", o.available},
              {"active", o.active},
              {"demo", o.provider == kDemoProviderName},
              {"created_at_ms", o.created_at_ms},
              {"measured", o.measured ? measured_json(*o.measured) : Json(nullptr)}};
}
Json rental_json(const market::Rental& r) {
  Json placements = Json::array();
  for (const auto& p : r.placements) {
    placements.push_back(Json{{"gpu_uuid", p.gpu_uuid},
                              {"gpu_id", p.gpu_id},
                              {"node_id", p.node_id},
                              {"profile", j_str_or_null(p.profile)},
                              {"start", p.start},
                              {"size", p.size}});
  }
  return Json{{"id", r.id},
              {"state", market::to_string(r.state)},
              {"state_reason", r.state_reason},
              {"version", r.version},
              {"offer", r.offer_id},
              {"tenant_id", r.tenant_id},
              {"provider_id", r.provider_id},
              {"target", r.target},
              {"count", r.count},
              {"price_per_hour", money(r.price_micros_per_hour)},
              {"price_micros_per_hour", r.price_micros_per_hour},
              {"min_billable_seconds", r.min_billable_seconds},
              {"template", j_str_or_null(r.template_name)},
              {"idempotency_key", j_str_or_null(r.idempotency_key)},
              {"ends_at_ms", j_opt(r.ends_at_ms)},
              {"created_at_ms", r.created_at_ms},
              {"updated_at_ms", r.updated_at_ms},
              {"placements", std::move(placements)}};
}
Json rentals_json(const std::vector<market::Rental>& rs) {
  Json a = Json::array();
  for (const auto& r : rs) a.push_back(rental_json(r));
  return Json{{"rentals", std::move(a)}};
}
Json nodes_json(const std::vector<market::Node>& ns) {
  Json a = Json::array();
  for (const auto& n : ns) a.push_back(node_json(n));
  return Json{{"nodes", std::move(a)}};
}
Json offers_json(const std::vector<market::Offer>& os) {
  Json a = Json::array();
  for (const auto& o : os) a.push_back(offer_json(o));
  return Json{{"offers", std::move(a)}};
}
Json templates_json(const std::vector<market::Template>& ts) {
  Json a = Json::array();
  for (const auto& t : ts) {
    a.push_back(Json{
        {"id", t.id}, {"name", t.name}, {"image", t.image}, {"command", t.command}, {"description", t.description}});
  }
  return Json{{"templates", std::move(a)}};
}
Json events_json(const std::vector<market::RentalEvent>& es) {
  Json a = Json::array();
  for (const auto& e : es) {
    a.push_back(Json{{"seq", e.seq},
                     {"at_ms", e.at_ms},
                     {"from", e.from ? Json(market::to_string(*e.from)) : Json(nullptr)},
                     {"to", market::to_string(e.to)},
                     {"actor", e.actor},
                     {"reason", e.reason}});
  }
  return Json{{"events", std::move(a)}};
}
Json rental_usage_json(const market::RentalUsage& u) {
  Json segs = Json::array();
  for (const auto& s : u.segments) {
    segs.push_back(Json{{"started_at_ms", s.started_at_ms},
                        {"ended_at_ms", j_opt(s.ended_at_ms)},
                        {"price_micros_per_hour", s.price_micros_per_hour}});
  }
  return Json{{"rental_id", u.rental_id},
              {"billed_seconds", u.billed_seconds},
              {"charge_micros", u.charge_micros},
              {"charge", money(u.charge_micros)},
              {"segments", std::move(segs)}};
}
Json usage_json(const market::TenantUsage& u) {
  Json a = Json::array();
  for (const auto& r : u.rentals) a.push_back(rental_usage_json(r));
  return Json{{"tenant_id", u.tenant_id},
              {"charge_micros", u.charge_micros},
              {"charge", money(u.charge_micros)},
              {"credit_limit", j_opt(u.credit_limit_micros)},
              {"rentals", std::move(a)}};
}
Json earnings_json(const market::Earnings& e) {
  Json a = Json::array();
  for (const auto& r : e.rentals) a.push_back(rental_usage_json(r));
  return Json{{"provider_id", e.provider_id},
              {"earnings_micros", e.earnings_micros},
              {"earnings", money(e.earnings_micros)},
              {"rentals", std::move(a)}};
}

// --- reading a body ------------------------------------------------------------------------------------------
// Every body is read through the one typed reader (core/request.h) by its declaration in
// data/options.yaml (market.create.tenant, market.add.node, ...: strict, so "3" is not a number and every
// string is bounded; keys a body does not declare are ignored, as issue #13's "more keys are welcome").

// Dollars per hour -> integer micro-dollars, exactly (core/decimal.h: the number's shortest decimal text,
// so 0.35 is 350000), refusing what is not a price or not a whole number of micro-units.
Result<int64_t> price_micros(double per_hour, const char* field) {
  const auto micros = micros_from_double(per_hour, market::kMaxPriceMicrosPerHour);
  if (!micros || *micros < 1) {
    const auto max = market::kMaxPriceMicrosPerHour / static_cast<int64_t>(kMicrosPerUnit);
    return usage_error(std::string("'") + field + "' must be a price per hour above 0 and at most " +
                           std::to_string(max) + ", in whole micro-units (at most 6 decimals)",
                       field);
  }
  return *micros;
}

// If-Match: 3, "3" or W/"3" -> 3; absent -> nullopt.
Result<std::optional<int64_t>> if_match(const HttpRequest& req) {
  std::string_view v = trim(req.if_match);
  if (v.empty()) return std::optional<int64_t>{};
  if (v.starts_with("W/")) v.remove_prefix(2);
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  int64_t n = 0;
  if (v.empty() || v.size() > 18 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return usage_error("If-Match must be the rental's version, a whole number (as GET /rentals/{id} says)", "If-Match");
  }
  for (char c : v) n = n * 10 + (c - '0');
  return std::optional<int64_t>{n};
}

std::string query_value(const HttpRequest& req, std::string_view key) {
  for (const auto& [k, v] : req.query) {
    if (k == key) return v;
  }
  return {};
}

Result<market::NodeSpec> node_spec(const Json& body) {
  const Request req(body, "market.add.node");
  GPUPLAN_CHECK(req.check_keys());
  market::NodeSpec spec;
  GPUPLAN_TRY(name, req.text("name"));
  GPUPLAN_TRY(region, req.text("region"));
  GPUPLAN_TRY(ic, req.text("interconnect"));
  GPUPLAN_TRY(interconnect, market::parse_interconnect(ic, "interconnect"));
  GPUPLAN_TRY(vcpus, req.whole("vcpus"));
  GPUPLAN_TRY(ram, req.whole("ram_gb"));
  GPUPLAN_TRY(disk, req.whole("disk_gb"));
  GPUPLAN_TRY(gpus, req.objects("gpus"));
  GPUPLAN_TRY(sched, req.text("scheduler"));
  GPUPLAN_TRY(scheduler, market::parse_scheduler(sched, "scheduler"));
  GPUPLAN_TRY(partition, req.text("slurm_partition"));
  GPUPLAN_TRY(slurm_node, req.text("slurm_node"));
  GPUPLAN_TRY(ssh, req.text("ssh"));
  GPUPLAN_TRY(node_mig, req.text("mig_policy"));
  GPUPLAN_TRY(mig_policy, market::parse_mig_policy(node_mig, "mig_policy"));
  spec.mig_policy = mig_policy;
  spec.scheduler = scheduler;
  spec.slurm_partition = partition;
  spec.slurm_node = slurm_node;
  spec.ssh = ssh;
  spec.name = name;
  spec.region = region;
  spec.interconnect = interconnect;
  spec.vcpus = vcpus;
  spec.ram_gb = ram;
  spec.disk_gb = disk;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const std::string field = "gpus[" + std::to_string(i) + "]";
    const Request& gpu = gpus[i];
    auto target = gpu.text("target");
    auto uuid = gpu.text("uuid");
    auto mig = gpu.text("mig");
    auto layout = gpu.text("layout");
    for (auto* r : {&target, &uuid, &mig, &layout}) {
      if (!*r) return item_error(r->error(), field);
    }
    auto policy = market::parse_mig_policy(*mig, field + ".mig");
    if (!policy) return policy.error();
    spec.gpus.push_back(market::GpuSpec{*target, *uuid, *policy, *layout});
  }
  return spec;
}

Result<market::OfferSpec> offer_spec(const Json& body) {
  const Request req(body, "market.create.offer");
  GPUPLAN_CHECK(req.check_keys());
  market::OfferSpec spec;
  GPUPLAN_TRY(target, req.text("target"));
  GPUPLAN_TRY(region, req.text("region"));
  GPUPLAN_TRY(gpus, req.whole("gpus"));
  GPUPLAN_TRY(min_s, req.whole("min_billable_seconds"));
  GPUPLAN_TRY(price, req.real("price_per_hour", 0.0));  // required: absent is refused
  GPUPLAN_TRY(micros, price_micros(price, "price_per_hour"));
  spec.target = target;
  spec.region = region;
  spec.gpus = static_cast<int>(gpus);
  spec.min_billable_seconds = min_s;
  spec.price_micros_per_hour = micros;
  return spec;
}

// A rent body: {offer, count, ...} or, with `with_plan`, {plan, ...} (no offer: the plan names it).
Result<market::RentRequest> rent_request(const Json& body, int64_t now_ms, bool with_plan = false) {
  const Request req(body, "market.rent");
  GPUPLAN_CHECK(req.check_keys());
  market::RentRequest r;
  GPUPLAN_TRY(offer, req.text("offer"));
  GPUPLAN_TRY(offer_id_text, req.text("offer_id"));  // the design notes' name
  const std::string offer_id = req.has("offer_id") ? offer_id_text : offer;
  if (with_plan && !offer_id.empty()) {
    return usage_error("give 'offer' (rent that offer) or 'plan' (rent what the plan recommends), not both", "plan");
  }
  if (with_plan && !req.raw("plan").is_object()) {
    return usage_error(
        "'plan' must be an object: the request POST /api/v1/plan takes ({\"model\": ..., \"rate\": ...})", "plan");
  }
  if (offer_id.empty() && !with_plan) {
    return usage_error("'offer' is required: an offer id from GET /offers?source=market (or 'plan': a plan request)",
                       "offer");
  }
  GPUPLAN_TRY(count, req.whole("count"));
  GPUPLAN_TRY(key, req.text("idempotency_key"));
  GPUPLAN_TRY(tpl, req.text("template"));
  GPUPLAN_TRY(ends, req.whole("ends_at_ms"));
  GPUPLAN_TRY(hours, req.real("hours"));  // declared (0, 8784]: a year of 366 days, far from overflow
  r.offer_id = offer_id;
  r.count = static_cast<int>(count);
  r.idempotency_key = key;
  r.template_name = tpl;
  if (req.has("ends_at_ms")) r.ends_at_ms = ends;
  if (hours) r.ends_at_ms = now_ms + static_cast<int64_t>(std::llround(*hours * kMillisPerHour));
  return r;
}

bool is_id(const std::string& s) { return !s.empty() && s.size() <= market::kMaxNameBytes; }

// Where a fresh plan is: the 409s of plan-then-rent carry it, so that a client replans in one call.
constexpr const char* kReplanPath = "/api/v1/plan";
// Rejections of a plan that a 409 "nothing meets the plan now" quotes (the plan lists them all).
constexpr size_t kRejectionsQuoted = 3;

HttpResponse replan_conflict(const Error& e) {
  Json j = error_json(e);
  j["replan"] = kReplanPath;
  j["error"]["replan"] = kReplanPath;
  return market_json_answer(http_status(e.code), j);
}

// POST /rentals {"plan": <a plan request>, template?, idempotency_key?, hours?, ends_at_ms?}: plans over
// the market's live offers NOW (source market: only they can be rented), takes the recommended option
// and rents all of its instances in one transaction (Market::rent_many), all or nothing. 201 {plan,
// rentals}; 409 conflict with `replan` when nothing meets the plan now or the offer sold out between
// the plan and the rent.
HttpResponse rent_plan(Market& m, const Principal& p, const Json& body, const PlanRunner& plan) {
  auto base = rent_request(body, m.clock().now_ms(), true);
  if (!base) return market_error_answer(base.error());
  // Who may rent, before any planning (a viewer's write is 403 whatever the plan finds).
  if (auto gate = m.rent_many(p, {}); !gate && gate.error().code != ErrorCode::kUsage)
    return market_error_answer(gate.error());
  if (!plan) {
    return error_response(404, "plan_unavailable",
                          "this server cannot plan; rent an offer by its id ({\"offer\": ...})", "plan");
  }
  // A replay (the same idempotency key): the rentals made the first time, whatever a plan would say now.
  if (!base->idempotency_key.empty()) {
    if (auto mine = m.list_rentals(p); mine) {
      Json made = Json::array();
      for (size_t i = 1; i <= market::kMaxRentManyRentals; ++i) {
        const std::string key = base->idempotency_key + "/" + std::to_string(i);
        auto it = std::find_if(mine->begin(), mine->end(), [&](const auto& r) { return r.idempotency_key == key; });
        if (it == mine->end()) break;
        made.push_back(rental_json(*it));
      }
      if (!made.empty())
        return market_json_answer(200, Json{{"plan", nullptr}, {"rentals", std::move(made)}, {"replayed", true}});
    }
  }
  Json request = Request(body, "market.rent").raw("plan");
  if (request.contains("source") && request["source"] != "market") {
    return market_error_answer(
        usage_error("a plan to rent uses the market's live offers only: drop 'source' or set it to "
                    "\"market\" (POST /api/v1/plan compares them with offers files)",
                    "plan.source"));
  }
  request["source"] = "market";
  request.erase("market");  // the server's snapshot, taken now, not the client's
  auto planned = plan(request);
  if (!planned) {
    Error e = planned.error();
    if (!e.field.empty()) e.field = "plan." + e.field;
    return market_error_answer(e);
  }
  const Json& best = (*planned)["best"];
  if (!best.is_object() || !best.contains("offer") || !best["offer"].is_string() || !best["instances"].is_number()) {
    std::string why;
    size_t quoted = 0;
    for (const auto& r : (*planned)["rejected"]) {
      if (quoted++ == kRejectionsQuoted) break;
      why += (why.empty() ? " (" : "; ") + r.value("offer", std::string()) + ": " + r.value("reason", std::string());
    }
    if (!why.empty()) why += ")";
    return replan_conflict(Error{ErrorCode::kConflict,
                                 "no live market offer meets this plan now" + why +
                                     "; nothing was rented: change the plan or plan again later (POST " + kReplanPath +
                                     " gives every offer's reason)",
                                 "plan"});
  }
  const std::string offer_id = best["offer"].get<std::string>();
  const int64_t instances = best["instances"].get<int64_t>();
  if (instances < 1 || static_cast<size_t>(instances) > market::kMaxRentManyRentals) {
    return market_error_answer(limit_error(
        "the plan needs " + std::to_string(instances) + " instances; one rent holds 1 to " +
            std::to_string(market::kMaxRentManyRentals) + " (kMaxRentManyRentals): plan with a lower max_instances",
        "plan.max_instances"));
  }
  std::vector<market::RentRequest> requests;
  for (int64_t i = 0; i < instances; ++i) {
    market::RentRequest r = *base;
    r.offer_id = offer_id;
    r.count = 1;  // one instance per rental: replicas may sit on different nodes; an instance's GPUs on one
    if (!base->idempotency_key.empty()) r.idempotency_key = base->idempotency_key + "/" + std::to_string(i + 1);
    requests.push_back(std::move(r));
  }
  auto rented = m.rent_many(p, requests);
  if (!rented) {
    Error e = rented.error();
    if (e.code != ErrorCode::kConflict) return market_error_answer(e);
    e.message = "the plan's offer " + offer_id + " sold out between planning and renting, so nothing was rented (" +
                e.message + "); plan again (POST " + kReplanPath + ") and rent the new plan";
    e.field = "plan";
    return replan_conflict(e);
  }
  bool replayed = true;
  Json rentals = Json::array();
  for (const auto& r : *rented) {
    replayed = replayed && r.replayed;
    rentals.push_back(rental_json(r));
  }
  return market_json_answer(replayed ? 200 : 201, Json{{"plan", best}, {"rentals", std::move(rentals)}});
}

HttpResponse no_route(const HttpRequest& req) {
  return error_response(404, "not_found",
                        "no API route " + req.method + " " + req.path + "; the routes are in /api/v1/openapi.json",
                        "path");
}

}  // namespace

bool is_market_route(const HttpRequest& req, const std::vector<std::string>& segs) {
  if (segs.empty()) return false;
  const std::string& root = segs[0];
  if (root == "tenants" || root == "tokens" || root == "nodes" || root == "provider" || root == "rentals" ||
      root == "usage" || root == "templates" || root == "agent") {
    return true;
  }
  if (root == "offers") {
    // GET /offers and POST /offers[/list] are offers.list (files, and on a server with a store the
    // market's rows beside them: market_offers_snapshot); the market itself answers GET
    // /offers?source=market (its own shape), DELETE /offers/{id}, and POST /offers with a bearer token.
    if (req.method == "GET" || req.method == "HEAD") return segs.size() == 1 && query_value(req, "source") == "market";
    if (req.method == "DELETE") return true;
    return req.method == "POST" && segs.size() == 1 && !trim(req.authorization).empty();
  }
  return false;
}

Result<Json> market_offers_snapshot(const Market& m) {
  GPUPLAN_TRY(offers, m.list_offers());
  return offers_json(offers);
}

Result<Json> market_availability_snapshot(const Market& m) {
  GPUPLAN_TRY(offers, market_offers_snapshot(m));
  GPUPLAN_TRY(seen, m.last_available());
  Json out = offers;
  Json rows = Json::array();
  for (const auto& s : seen) rows.push_back(Json{{"target", s.target}, {"region", s.region}, {"at_ms", s.at_ms}});
  out["last_available"] = std::move(rows);
  return out;
}

HttpResponse market_disabled_response() {
  return error_response(404, "market_disabled",
                        "this server has no market: start it with `gpuplan serve --data-dir DIR` (SQLite) or "
                        "`gpuplan serve --database postgresql://...` (or `make run` for a demo)",
                        "path");
}

HttpResponse market_response(Market& m, const HttpRequest& req, const std::vector<std::string>& segs, const Json& body,
                             const PlanRunner& plan) {
  const std::string& method = req.method;
  const bool get = method == "GET" || method == "HEAD";
  const bool post = method == "POST";
  const bool del = method == "DELETE";
  const size_t n = segs.size();
  const std::string& root = segs[0];
  if (n > 1 && !is_id(segs[1])) return no_route(req);
  if (root == "agent") return agent_response(m, req, segs, body);  // the node agent's own endpoints

  // Public reads: the live catalog, like any rental site's.
  if (root == "offers" && n == 1 && get) {
    market::OfferFilter filter;
    filter.target = query_value(req, "target");
    filter.region = query_value(req, "region");
    filter.provider = query_value(req, "provider");
    return answer(m.list_offers(filter), 200, offers_json);
  }
  if (root == "templates") {
    if (n != 1) return no_route(req);
    if (!get) {
      HttpResponse res = error_response(405, "method_not_allowed", "use GET here", "method");
      res.headers.emplace_back("Allow", "GET");
      return res;
    }
    return answer(m.list_templates(), 200, templates_json);
  }

  // Everything else needs a token. The route is checked first, so that an unknown path is 404 either way.
  enum class Op {
    kNone,
    kCreateTenant,
    kCreateUser,
    kCreateToken,
    kRevokeToken,
    kAddNode,
    kListNodes,
    kDrainNode,
    kEnrollment,
    kBenchNode,
    kRemoveNode,
    kCreateOffer,
    kDeleteOffer,
    kProviderRentals,
    kEarnings,
    kRent,
    kListRentals,
    kGetRental,
    kStop,
    kStart,
    kDeleteRental,
    kEvents,
    kAccess,
    kUsage
  };
  Op op = Op::kNone;
  // (path shape, method) -> operation; a path that exists with another method is 405.
  struct Shape {
    bool matches;
    Op op;
    const char* method;
  };
  const Shape shapes[] = {
      {root == "tenants" && n == 1, Op::kCreateTenant, "POST"},
      {root == "tenants" && n == 3 && segs[2] == "users", Op::kCreateUser, "POST"},
      {root == "tokens" && n == 1, Op::kCreateToken, "POST"},
      {root == "tokens" && n == 2, Op::kRevokeToken, "DELETE"},
      {root == "nodes" && n == 1, Op::kAddNode, "POST"},
      {root == "nodes" && n == 1, Op::kListNodes, "GET"},
      {root == "nodes" && n == 3 && segs[2] == "drain", Op::kDrainNode, "POST"},
      {root == "nodes" && n == 3 && segs[2] == "enrollment", Op::kEnrollment, "POST"},
      {root == "nodes" && n == 3 && segs[2] == "bench", Op::kBenchNode, "POST"},
      {root == "nodes" && n == 2, Op::kRemoveNode, "DELETE"},
      {root == "offers" && n == 1, Op::kCreateOffer, "POST"},
      {root == "offers" && n == 2, Op::kDeleteOffer, "DELETE"},
      {root == "provider" && n == 2 && segs[1] == "rentals", Op::kProviderRentals, "GET"},
      {root == "provider" && n == 2 && segs[1] == "earnings", Op::kEarnings, "GET"},
      {root == "rentals" && n == 1, Op::kRent, "POST"},
      {root == "rentals" && n == 1, Op::kListRentals, "GET"},
      {root == "rentals" && n == 2, Op::kGetRental, "GET"},
      {root == "rentals" && n == 3 && segs[2] == "stop", Op::kStop, "POST"},
      {root == "rentals" && n == 3 && segs[2] == "start", Op::kStart, "POST"},
      {root == "rentals" && n == 2, Op::kDeleteRental, "DELETE"},
      {root == "rentals" && n == 3 && segs[2] == "events", Op::kEvents, "GET"},
      {root == "rentals" && n == 3 && segs[2] == "access", Op::kAccess, "GET"},
      {root == "usage" && n == 1, Op::kUsage, "GET"},
  };
  std::string allowed;
  for (const Shape& s : shapes) {
    if (!s.matches) continue;
    const std::string_view want(s.method);
    if (op == Op::kNone && ((want == "GET" && get) || (want == "POST" && post) || (want == "DELETE" && del))) op = s.op;
    if (allowed.find(s.method) == std::string::npos) allowed += (allowed.empty() ? "" : ", ") + std::string(s.method);
  }
  if (op == Op::kNone) {
    if (allowed.empty()) return no_route(req);
    HttpResponse res = error_response(405, "method_not_allowed", "use " + allowed + " here", "method");
    res.headers.emplace_back("Allow", allowed);
    return res;
  }

  if (trim(req.authorization).empty()) {
    return market_error_answer(
        Error{ErrorCode::kUnauthenticated,
              "this endpoint needs `Authorization: Bearer <token>` (`gpuplan admin init` prints the "
              "platform's first token; `POST /tokens` makes more)",
              "Authorization"});
  }
  if (Market::looks_like_agent_token(req.authorization)) {
    // A node agent's token opens /agent/* only (issue #15): a valid one is 403 here, anything else 401.
    auto agent = m.authenticate_agent(req.authorization);
    if (!agent) return market_error_answer(agent.error());
    return market_error_answer(
        Error{ErrorCode::kForbidden,
              "a node agent's token opens only /api/v1/agent/*; use a user's token (gpl_...) here", ""});
  }
  auto principal = m.authenticate(req.authorization);
  if (!principal) return market_error_answer(principal.error());
  const Principal& p = *principal;

  switch (op) {
    case Op::kCreateTenant: {
      const Request in(body, "market.create.tenant");
      if (Status keys = in.check_keys(); !keys) return market_error_answer(keys.error());
      auto name = in.text("name");
      if (!name) return market_error_answer(name.error());
      auto kind_text = in.text("kind");
      if (!kind_text) return market_error_answer(kind_text.error());
      auto kind = market::parse_tenant_kind(*kind_text, "kind");
      if (!kind) return market_error_answer(kind.error());
      auto limit = in.whole("credit_limit");
      if (!limit) return market_error_answer(limit.error());
      auto t = m.create_tenant(p, *name, *kind);
      if (!t) return market_error_answer(t.error());
      if (in.has("credit_limit")) {
        auto with = m.set_credit_limit(p, t->id, *limit);
        if (!with) return market_error_answer(with.error());
        return market_json_answer(201, tenant_json(*with));
      }
      return market_json_answer(201, tenant_json(*t));
    }
    case Op::kCreateUser: {
      const Request in(body, "market.create.user");
      if (Status keys = in.check_keys(); !keys) return market_error_answer(keys.error());
      auto name = in.text("name");
      if (!name) return market_error_answer(name.error());
      auto role_text = in.text("role");
      if (!role_text) return market_error_answer(role_text.error());
      auto role = market::parse_role(*role_text, "role");
      if (!role) return market_error_answer(role.error());
      return answer(m.create_user(p, segs[1], *name, *role), 201, user_json);
    }
    case Op::kCreateToken: {
      const Request in(body, "market.create.token");
      if (Status keys = in.check_keys(); !keys) return market_error_answer(keys.error());
      auto user = in.text("user_id");
      if (!user) return market_error_answer(user.error());
      auto expires = in.whole("expires_at_ms");
      if (!expires) return market_error_answer(expires.error());
      auto scope_text = in.text("scope");
      if (!scope_text) return market_error_answer(scope_text.error());
      auto scope = market::parse_scope(*scope_text, "scope");
      if (!scope) return market_error_answer(scope.error());
      market::TokenOptions options;
      if (in.has("expires_at_ms")) options.expires_at_ms = *expires;
      options.scope = *scope;
      return answer(m.create_token(p, in.has("user_id") ? *user : p.user_id, options), 201, token_json);
    }
    case Op::kRevokeToken: {
      Status s = m.revoke_token(p, segs[1]);
      if (!s) return market_error_answer(s.error());
      return market_json_answer(200, Json{{"id", segs[1]}, {"revoked", true}});
    }
    case Op::kAddNode: {
      auto spec = node_spec(body);
      if (!spec) return market_error_answer(spec.error());
      auto node = m.add_node(p, *spec);
      if (!node) return market_error_answer(node.error());
      // The node's one-time enrolment token for `gpuplan agent --enroll` (shown once; POST
      // /nodes/{id}/enrollment issues a fresh one).
      auto enrol = m.issue_enrollment(p, node->id);
      if (!enrol) return market_error_answer(enrol.error());
      Json out = node_json(*node);
      out["enrollment_token"] = enrol->token;
      out["enrollment_expires_at_ms"] = enrol->expires_at_ms;
      return market_json_answer(201, out);
    }
    case Op::kEnrollment: {
      auto enrol = m.issue_enrollment(p, segs[1]);
      if (!enrol) return market_error_answer(enrol.error());
      return market_json_answer(201, Json{{"node_id", enrol->node_id},
                                          {"enrollment_token", enrol->token},
                                          {"enrollment_expires_at_ms", enrol->expires_at_ms}});
    }
    case Op::kBenchNode: {
      // The node's agent benches its GPUs again (issue #16): the next heartbeat answers carry the request.
      auto r = m.request_bench(p, segs[1]);
      if (!r) return market_error_answer(r.error());
      return market_json_answer(
          200,
          Json{{"node_id", r->node_id}, {"bench_request", r->bench_request}, {"bench_answered", r->bench_answered}});
    }
    case Op::kListNodes:
      return answer(m.list_nodes(p), 200, nodes_json);
    case Op::kDrainNode:
      return answer(m.drain_node(p, segs[1]), 200, node_json);
    case Op::kRemoveNode: {
      Status s = m.remove_node(p, segs[1]);
      if (!s) return market_error_answer(s.error());
      return market_json_answer(200, Json{{"id", segs[1]}, {"removed", true}});
    }
    case Op::kCreateOffer: {
      auto spec = offer_spec(body);
      if (!spec) return market_error_answer(spec.error());
      return answer(m.create_offer(p, *spec), 201, offer_json);
    }
    case Op::kDeleteOffer: {
      Status s = m.delete_offer(p, segs[1]);
      if (!s) return market_error_answer(s.error());
      return market_json_answer(200, Json{{"id", segs[1]}, {"deleted", true}});
    }
    case Op::kProviderRentals:
      return answer(m.list_provider_rentals(p), 200, rentals_json);
    case Op::kEarnings:
      return answer(m.earnings(p), 200, earnings_json);
    case Op::kRent: {
      if (Request(body, "market.rent").has("plan")) return rent_plan(m, p, body, plan);
      auto request = rent_request(body, m.clock().now_ms());
      if (!request) return market_error_answer(request.error());
      auto r = m.rent(p, *request);
      if (!r) return market_error_answer(r.error());
      return market_json_answer(r->replayed ? 200 : 201, rental_json(*r));
    }
    case Op::kListRentals:
      return answer(m.list_rentals(p), 200, rentals_json);
    case Op::kGetRental: {
      auto r = m.get_rental(p, segs[1]);
      if (!r) return market_error_answer(r.error());
      HttpResponse res = market_json_answer(200, rental_json(*r));
      res.headers.emplace_back("ETag", "\"" + std::to_string(r->version) + "\"");
      return res;
    }
    case Op::kStop:
    case Op::kStart:
    case Op::kDeleteRental: {
      auto version = if_match(req);
      if (!version) return market_error_answer(version.error());
      auto r = op == Op::kStop    ? m.stop_rental(p, segs[1], *version)
               : op == Op::kStart ? m.start_rental(p, segs[1], *version)
                                  : m.delete_rental(p, segs[1], *version);
      if (!r) return market_error_answer(r.error());
      HttpResponse res = market_json_answer(200, rental_json(*r));
      res.headers.emplace_back("ETag", "\"" + std::to_string(r->version) + "\"");
      return res;
    }
    case Op::kEvents:
      return answer(m.rental_events(p, segs[1]), 200, events_json);
    case Op::kAccess:
      return answer(m.rental_access(p, segs[1]), 200, access_json);
    case Op::kUsage:
      return answer(m.usage(p), 200, usage_json);
    case Op::kNone:
      break;
  }
  return no_route(req);
}

}  // namespace gpuplan::server

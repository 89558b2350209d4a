// The node agent's endpoints (see agent_routes.h): request JSON -> one Market call -> answer JSON.
#include "server/agent_routes.h"

#include "core/request.h"
#include "server/market_routes.h"
#include "server/server.h"

namespace gpuplan::server {

namespace {

using market::Market;

// The market's errors, with the agent's two kinds of 409 named: `stale` (an older seq: fenced) and
// `inventory_required` (a heartbeat from a boot the inventory has not described).
HttpResponse agent_error_answer(const Error& e) {
  if (e.code == ErrorCode::kConflict && (e.field == "seq" || e.field == "bench_request")) {
    return error_response(409, "stale", e.message, e.field);
  }
  if (e.code == ErrorCode::kConflict && e.field == "boot_id") {
    return error_response(409, "inventory_required", e.message, e.field);
  }
  return market_error_answer(e);
}

HttpResponse method_not_allowed(const char* allowed) {
  HttpResponse res = error_response(405, "method_not_allowed", std::string("use ") + allowed + " here", "method");
  res.headers.emplace_back("Allow", allowed);
  return res;
}

// The agent behind the request's token. A user's valid token is 403 (it opens everything but this); a
// missing or unknown one 401.
Result<market::AgentPrincipal> agent_of(Market& m, const HttpRequest& req) {
  if (trim(req.authorization).empty()) {
    return Error{ErrorCode::kUnauthenticated,
                 "the agent endpoints need `Authorization: Bearer gpa_...`, the token POST /agent/enroll gave",
                 "Authorization"};
  }
  if (!Market::looks_like_agent_token(req.authorization)) {
    if (m.authenticate(req.authorization)) {
      return Error{ErrorCode::kForbidden, "the agent endpoints take a node agent's token (gpa_...), not a user's", ""};
    }
  }
  return m.authenticate_agent(req.authorization);
}

Result<market::Inventory> inventory_of(const Json& body) {
  const Request req(body, "market.agent.inventory");
  GPUPLAN_CHECK(req.check_keys());
  market::Inventory inv;
  GPUPLAN_TRY(seq, req.whole("seq"));
  GPUPLAN_TRY(boot, req.text("boot_id"));
  GPUPLAN_TRY(driver, req.text("driver_version"));
  GPUPLAN_TRY(off, req.words("features_off"));
  GPUPLAN_TRY(gpus, req.objects("gpus"));
  inv.seq = seq;
  inv.boot_id = boot;
  inv.driver_version = driver;
  inv.features_off = off;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const std::string field = "gpus[" + std::to_string(i) + "]";
    const Request& g = gpus[i];
    market::InventoryGpu out;
    auto uuid = g.text("uuid");
    auto name = g.text("name");
    auto pci = g.text("pci_bus_id");
    auto mig = g.text("mig_mode");
    for (auto* r : {&uuid, &name, &pci, &mig}) {
      if (!*r) return item_error(r->error(), field);
    }
    auto memory = g.whole("memory_bytes");
    if (!memory) return item_error(memory.error(), field);
    auto instances = g.objects("instances");
    if (!instances) return item_error(instances.error(), field);
    out.uuid = *uuid;
    out.name = *name;
    out.pci_bus_id = *pci;
    out.mig_mode = *mig;
    out.memory_bytes = *memory;
    for (size_t k = 0; k < instances->size(); ++k) {
      const std::string fi = field + ".instances[" + std::to_string(k) + "]";
      auto profile = (*instances)[k].text("profile");
      if (!profile) return item_error(profile.error(), fi);
      auto start = (*instances)[k].whole("start");
      if (!start) return item_error(start.error(), fi);
      out.instances.push_back(market::InventoryInstance{*profile, static_cast<int>(*start)});
    }
    inv.gpus.push_back(std::move(out));
  }
  return inv;
}

Result<market::Heartbeat> heartbeat_of(const Json& body) {
  const Request req(body, "market.agent.heartbeat");
  GPUPLAN_CHECK(req.check_keys());
  market::Heartbeat hb;
  GPUPLAN_TRY(seq, req.whole("seq"));
  GPUPLAN_TRY(boot, req.text("boot_id"));
  GPUPLAN_TRY(running, req.objects("running"));
  hb.seq = seq;
  hb.boot_id = boot;
  for (size_t i = 0; i < running.size(); ++i) {
    const std::string field = "running[" + std::to_string(i) + "]";
    auto id = running[i].text("rental_id");
    if (!id) return item_error(id.error(), field);
    auto generation = running[i].whole("generation");
    if (!generation) return item_error(generation.error(), field);
    hb.running.push_back(market::RunningReport{*id, *generation});
  }
  // What the node could not start (dynamic MIG): the server fails those rentals (fenced by generation).
  GPUPLAN_TRY(failed, req.objects("failed"));
  for (size_t i = 0; i < failed.size(); ++i) {
    const std::string field = "failed[" + std::to_string(i) + "]";
    auto id = failed[i].text("rental_id");
    if (!id) return item_error(id.error(), field);
    auto generation = failed[i].whole("generation");
    if (!generation) return item_error(generation.error(), field);
    auto code = failed[i].text("code");
    if (!code) return item_error(code.error(), field);
    auto message = failed[i].text("message");
    if (!message) return item_error(message.error(), field);
    hb.failed.push_back(market::FailedReport{*id, *generation, *code, *message});
  }
  return hb;
}

// PUT /agent/bench: {gpu_uuid, profile?, calibration: "the file's JSON text"}.
Result<market::BenchReport> bench_of(const Json& body) {
  const Request req(body, "market.agent.bench");
  GPUPLAN_CHECK(req.check_keys());
  GPUPLAN_TRY(uuid, req.text("gpu_uuid"));
  GPUPLAN_TRY(profile, req.text("profile"));
  GPUPLAN_TRY(text, req.text("calibration"));
  GPUPLAN_TRY(request, req.whole("bench_request"));
  market::BenchReport r;
  r.bench_request = request;
  r.gpu_uuid = uuid;
  r.profile = profile;
  r.calibration_text = text;
  return r;
}

Json inventory_json(const market::InventoryResult& r) {
  Json gpus = Json::array();
  for (const auto& g : r.gpus) {
    gpus.push_back(
        Json{{"uuid", g.uuid},
             {"target", g.target.empty() ? Json(nullptr) : Json(g.target)},
             {"sellable", g.unsellable_reason.empty()},
             {"unsellable_reason", g.unsellable_reason.empty() ? Json(nullptr) : Json(g.unsellable_reason)}});
  }
  return Json{{"node_id", r.node_id},
              {"seq", r.seq},
              {"gpus", std::move(gpus)},
              {"resumed", r.resumed},
              {"lost", r.lost},
              {"ended", r.ended},
              {"heartbeat_seconds", market::kHeartbeatSeconds}};
}

Json desired_json(const market::HeartbeatAnswer& a) {
  Json desired = Json::array();
  for (const auto& d : a.desired) {
    desired.push_back(Json{{"rental_id", d.rental_id},
                           {"generation", d.generation},
                           {"state", market::to_string(d.state)},
                           {"gpu_uuid", d.gpu_uuid},
                           {"profile", d.profile.empty() ? Json(nullptr) : Json(d.profile)},
                           {"placement", d.placement}});
  }
  Json out{{"desired", std::move(desired)},
           {"heartbeat_seconds", a.heartbeat_seconds},
           {"ignored", a.ignored},
           {"mig_policy", market::to_string(a.mig_policy)}};  // the agent writes MIG only when "dynamic"
  if (!a.failed.empty()) out["failed"] = a.failed;
  out["bench_request"] = a.bench_request;
  return out;
}

}  // namespace

HttpResponse agent_response(Market& m, const HttpRequest& req, const std::vector<std::string>& segs, const Json& body) {
  const std::string& method = req.method;
  const std::string what = segs.size() == 2 ? segs[1] : std::string();
  if (what == "enroll") {
    if (method != "POST") return method_not_allowed("POST");
    const Request in(body, "market.agent.enroll");
    if (Status keys = in.check_keys(); !keys) return agent_error_answer(keys.error());
    auto token = in.text("enrollment_token");
    if (!token) return agent_error_answer(token.error());
    auto boot = in.text("boot_id");
    if (!boot) return agent_error_answer(boot.error());
    auto t = m.enroll_agent(*token, *boot);
    if (!t) return agent_error_answer(t.error());
    return market_json_answer(
        201, Json{{"node_id", t->node_id}, {"agent_token", t->token}, {"heartbeat_seconds", t->heartbeat_seconds}});
  }
  if (what == "inventory") {
    if (method != "PUT") return method_not_allowed("PUT");
    // The body first (a malformed one is 400 whoever sends it), then whose token it is.
    auto inv = inventory_of(body);
    if (!inv) return agent_error_answer(inv.error());
    auto agent = agent_of(m, req);
    if (!agent) return agent_error_answer(agent.error());
    auto r = m.put_inventory(*agent, *inv);
    if (!r) return agent_error_answer(r.error());
    return market_json_answer(200, inventory_json(*r));
  }
  if (what == "bench") {
    if (method != "PUT") return method_not_allowed("PUT");
    auto report = bench_of(body);
    if (!report) return agent_error_answer(report.error());
    auto agent = agent_of(m, req);
    if (!agent) return agent_error_answer(agent.error());
    auto r = m.put_bench(*agent, *report);
    if (!r) return agent_error_answer(r.error());
    return market_json_answer(200, Json{{"gpu_uuid", r->gpu_uuid},
                                        {"target", r->target},
                                        {"measured", measured_json(r->measured)},
                                        {"warnings", r->warnings},
                                        {"bench_request", r->bench_request}});
  }
  if (what == "heartbeat") {
    if (method != "POST") return method_not_allowed("POST");
    auto hb = heartbeat_of(body);
    if (!hb) return agent_error_answer(hb.error());
    auto agent = agent_of(m, req);
    if (!agent) return agent_error_answer(agent.error());
    auto r = m.heartbeat(*agent, *hb);
    if (!r) return agent_error_answer(r.error());
    if (r->stale) {
      // Fenced: the report acted on an older generation. The desired list comes along so it can catch up.
      Json out = desired_json(*r);
      out["error"] = Json{{"code", "stale"}, {"message", r->stale_reason}, {"field", "running"}};
      return market_json_answer(409, out);
    }
    return market_json_answer(200, desired_json(*r));
  }
  return error_response(404, "not_found",
                        "no API route " + req.method + " " + req.path + "; the routes are in /api/v1/openapi.json",
                        "path");
}

}  // namespace gpuplan::server

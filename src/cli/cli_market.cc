// The market's CLI (issue #13), in the style of gh and kubectl: every command is one HTTP call to a
// `gpuplan serve --data-dir/--database` server (--server URL or GPUPLAN_SERVER, token from --token or
// GPUPLAN_TOKEN), printed as a table, or as the server's JSON with --json. `admin init` is the one
// command that opens the store itself (it makes the first token, before any server can be called).
//
// The HTTP client is core/http_client.h: blocking, one request per connection, under a deadline, which
// is all a one-call CLI needs. Plain http:// only (a server on another machine goes behind a TLS proxy).
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <random>

#include "cli/cli.h"
#include "core/decimal.h"
#include "core/http_client.h"
#include "gpuplan/market.h"
#include "market/db.h"

namespace gpuplan::cli {

namespace {

// 128 random bits as hex, prefixed "cli-": a rent's idempotency key when the user gives none.
std::string random_idempotency_key() {
  std::random_device rd;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string key = "cli-";
  for (int i = 0; i < 4; ++i) {
    const uint32_t word = rd();
    for (int b = 0; b < 8; ++b) key += kHex[(word >> (4 * b)) & 0xfu];
  }
  return key;
}

constexpr const char* kDefaultServer = "http://127.0.0.1:8080";

struct MarketCli {
  std::string server;  // --server (global)
  std::string token;   // --token (global)
  CLI::App* admin_init = nullptr;
  std::string init_data_dir;
  std::string init_database;
  CLI::App* admin_deliver = nullptr;  // `admin deliver --once`: the outbox worker once, on the store itself
  std::string deliver_data_dir;
  std::string deliver_database;
  bool deliver_once = false;
  // One entry per subcommand: what it sends, how it prints.
  struct Call {
    CLI::App* app = nullptr;
    std::function<Result<Json>()> run;
    std::function<std::string(const Json&)> render;
  };
  std::deque<Call> calls;
  CLI::App* offers_list = nullptr;  // `offers list` (file offers) goes to the market with --server
  // `rent --plan`: the plan command's declared options on `rent` (data/options.yaml, as `gpuplan plan`).
  std::unique_ptr<CliCommand> rent_plan;
  bool rent_with_plan = false;
  // Option storage (CLI11 keeps pointers into it).
  std::deque<std::string> strings;
  std::deque<std::vector<std::string>> lists;
  std::deque<double> numbers;
  std::deque<long long> integers;
};

MarketCli& state() {
  static MarketCli s;
  return s;
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

Result<ErrorCode> code_from_name(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(ErrorCode::kUnavailable); ++i) {
    const auto code = static_cast<ErrorCode>(i);
    if (name == error_code_name(code)) return code;
  }
  return Error{ErrorCode::kInternal, "", ""};
}

// One call to the server: the answer's JSON, or the server's error as an Error (exit status from it).
Result<Json> call(const std::string& method, const std::string& path, const Json* body = nullptr,
                  const std::vector<std::pair<std::string, std::string>>& extra_headers = {}) {
  const MarketCli& s = state();
  const std::string server = s.server.empty() ? env_or("GPUPLAN_SERVER", kDefaultServer) : s.server;
  const std::string token = s.token.empty() ? env_or("GPUPLAN_TOKEN", "") : s.token;
  GPUPLAN_TRY(url, http::parse_url(server, "server"));
  const bool has_body = method != "GET" && method != "DELETE";
  const std::string payload = has_body && body ? body->dump() : std::string();
  http::Request req = http::api_request(method, path, token, has_body ? &payload : nullptr);
  for (const auto& [k, v] : extra_headers) req.headers.emplace_back(k, v);
  auto res = http::send(url, req);
  if (!res) {
    return Error{ErrorCode::kUnavailable,
                 "cannot reach the gpuplan server at " + server + ": " + res.error().message +
                     "; start one with `gpuplan serve --data-dir DIR` or pass --server / GPUPLAN_SERVER",
                 "server"};
  }
  Json answer;
  try {
    answer = Json::parse(res->body);
  } catch (const Json::exception&) {
    return Error{ErrorCode::kInternal,
                 "the server at " + server + " answered " + std::to_string(res->status) + " with no JSON", "server"};
  }
  if (res->status >= 400) {
    const Json& e = answer.contains("error") ? answer["error"] : Json::object();
    auto code = code_from_name(e.value("code", std::string()));
    Error err{code.ok() ? *code : ErrorCode::kInternal, e.value("message", "HTTP " + std::to_string(res->status)),
              e.contains("field") && e["field"].is_string() ? e["field"].get<std::string>() : std::string()};
    if (!code.ok()) {
      // Codes the library has no name for (the router's not_found of a route, busy, timeout).
      err.code = res->status == 404   ? ErrorCode::kNotFound
                 : res->status == 503 ? ErrorCode::kUnavailable
                 : res->status < 500  ? ErrorCode::kUsage
                                      : ErrorCode::kInternal;
    }
    return err;
  }
  return answer;
}

std::string s(const Json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  return fmt_value(v);
}

std::string table(const Json& items, const std::vector<std::string>& header, const std::vector<std::string>& keys,
                  const std::string& none) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& it : items) {
    std::vector<std::string> row;
    row.reserve(keys.size());
    for (const auto& k : keys) row.push_back(it.contains(k) ? s(it[k]) : "-");
    rows.push_back(std::move(row));
  }
  if (rows.empty()) return none + "\n";
  return render_table(header, rows);
}

std::string render_offers(const Json& r) {
  std::string out =
      table(r["offers"], {"id", "provider", "region", "target", "gpus", "usd_h", "available", "demo"},
            {"id", "provider", "region", "target", "gpus", "price_per_hour", "available", "demo"}, "no live offers");
  return out;
}
// `offers list --server`: the files' and the market's offers in one table, a SOURCE and an AVAILABLE
// column, demo rows marked "demo data" (also reads the market's own list, GET /offers?source=market).
std::string render_offer_rows(const Json& r) {
  std::vector<std::vector<std::string>> rows;
  size_t live = 0, demo = 0;
  const bool spot = r.contains("spot") && r["spot"] == true;
  for (const auto& o : r["offers"]) {
    const bool market = o.contains("source") && o["source"] == "market";
    const bool is_demo = o.contains("demo") && o["demo"] == true;
    live += market;
    demo += is_demo;
    const char* price_key = spot ? "spot_price_hour" : "price_hour";
    const char* per_gpu_key = spot ? "spot_price_per_gpu_hour" : "price_per_gpu_hour";
    const Json& price = o.contains(price_key) ? o[price_key] : o["price_per_hour"];
    Json per_gpu = o.contains(per_gpu_key) ? o[per_gpu_key] : Json(nullptr);
    if (per_gpu.is_null() && price.is_number() && o["gpus"].is_number() && o["gpus"].get<double>() > 0)
      per_gpu = price.get<double>() / o["gpus"].get<double>();
    const Json& avail = o["available"];
    const std::string available = avail.is_boolean() ? (avail.get<bool>() ? "yes" : "no") : s(avail);
    std::string note = is_demo ? "demo data" : "";
    if (o.contains("stale") && o["stale"] == true) note = "STALE";
    rows.push_back({s(o.contains("offer") ? o["offer"] : o["id"]), market ? "market" : "file", s(o["target"]),
                    s(o["gpus"]), s(price), s(per_gpu), available, note});
  }
  std::string out = render_table({"offer", "source", "target", "gpus", spot ? "spot_usd_h" : "usd_h",
                                  spot ? "spot_usd_gpu_h" : "usd_gpu_h", "available", "note"},
                                 rows, {false, false, false, true, true, true, true, false});
  out += "\n" + std::to_string(rows.size()) + " offers (" + std::to_string(live) + " live from the market, " +
         std::to_string(demo) + " of them demo data), cheapest per GPU-hour first";
  if (r.contains("rejected") && r.contains("skipped")) {
    out += "; " + std::to_string(r["rejected"].size()) + " not usable (--all lists them), " +
           std::to_string(r["skipped"].size()) + " lines skipped";
  }
  out += ".\n";
  return out;
}

// The request of `offers list --server` from the options given, as the server reads a query (strings,
// read by their declaration; a repeated option a list), sent to POST /offers/list: offers.list there,
// over its files and its market's live offers, whatever token is set. --offers names local files: the
// server uses its own.
Result<Json> offers_list_body(const CLI::App& list) {
  Json body = Json::object();
  for (const CLI::Option* o : list.get_options()) {
    if (o->count() == 0 || o->get_lnames().empty()) continue;
    std::string key = o->get_lnames().front();
    if (key == "help") continue;
    if (key == "offers")
      return usage_error("--offers reads local files; with --server the server lists its own offers (drop one)",
                         "offers");
    std::replace(key.begin(), key.end(), '-', '_');
    const std::vector<std::string> values = o->results();
    if (values.empty()) {
      body[key] = "true";  // a flag
    } else if (values.size() == 1) {
      body[key] = values.front();
    } else {
      body[key] = Json(values);
    }
  }
  return body;
}

std::string render_rental(const Json& r) {
  std::string out = "rental " + s(r["id"]) + ": " + s(r["state"]) + " (version " + s(r["version"]) + "), " +
                    s(r["target"]) + " x" + s(r["count"]) + " at $" + s(r["price_per_hour"]) + "/h\n";
  for (const auto& p : r["placements"]) {
    out += "  " + s(p["gpu_uuid"]) +
           (p["profile"].is_null() ? " whole GPU" : " " + s(p["profile"]) + " at slice " + s(p["start"])) + "\n";
  }
  return out;
}
// `rent --plan`: the option the server planned and rented, then each rental.
std::string render_plan_rentals(const Json& r) {
  const Json& p = r["plan"];
  std::string out = "Rented the recommended plan: " + s(p["offer"]) + " (" + s(p["target"]) + ") x" +
                    s(p["instances"]) + ", " + s(p["gpus"]) + " GPU(s), tp " + s(p["tp"]) + ", " + s(p["replicas"]) +
                    " replica(s), $" + s(p["cost_per_hour"]) + "/h: " + s(p["reason"]) + "\n";
  for (const auto& rental : r["rentals"]) out += render_rental(rental);
  return out;
}
std::string render_rentals(const Json& r) {
  return table(r["rentals"], {"id", "state", "version", "target", "count", "usd_h", "tenant"},
               {"id", "state", "version", "target", "count", "price_per_hour", "tenant_id"}, "no rentals");
}
std::string render_nodes(const Json& r) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& n : r["nodes"]) {
    int slices = 0, claimed = 0;
    for (const auto& g : n["gpus"]) {
      slices += g.value("memory_slices", 0);
      claimed += g.value("claimed_slices", 0);
    }
    rows.push_back({s(n["id"]), s(n["name"]), s(n["region"]), s(n["state"]), std::to_string(n["gpus"].size()),
                    std::to_string(claimed) + "/" + std::to_string(slices), s(n["live_rentals"]),
                    n.contains("mig_policy") ? s(n["mig_policy"]) : "static"});
  }
  if (rows.empty()) return "no nodes\n";
  return render_table({"id", "name", "region", "state", "gpus", "slices_held", "rentals", "mig_policy"}, rows);
}
std::string render_usage(const Json& r) {
  std::string out =
      table(r["rentals"], {"rental", "billed_s", "charge_usd"}, {"rental_id", "billed_seconds", "charge"}, "no usage");
  out += "total: $" + s(r.contains("charge") ? r["charge"] : r["earnings"]);
  if (r.contains("credit_limit") && !r["credit_limit"].is_null()) {
    out += " of a credit limit of $" + fmt_value(Json(r["credit_limit"].get<double>() / 1e6));
  }
  return out + "\n";
}
std::string render_id(const Json& r) {
  std::string out = "id: " + s(r["id"]) + "\n";
  if (r.contains("token")) out += "token: " + s(r["token"]) + "   (shown once: keep it)\n";
  return out;
}

std::string& str() { return state().strings.emplace_back(); }
std::vector<std::string>& lst() { return state().lists.emplace_back(); }
double& num() { return state().numbers.emplace_back(0); }
long long& integer() { return state().integers.emplace_back(0); }

MarketCli::Call& add(CLI::App* app, std::function<Result<Json>()> run, std::function<std::string(const Json&)> render) {
  return state().calls.emplace_back(MarketCli::Call{app, std::move(run), std::move(render)});
}

std::vector<std::pair<std::string, std::string>> if_match_header(const std::string& version) {
  if (version.empty()) return {};
  return {{"If-Match", "\"" + version + "\""}};
}

// --gpu TARGET:UUID[:MIG[:LAYOUT]] -> {"target", "uuid", "mig", "layout"}
Result<Json> gpu_json(const std::string& spec) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (int i = 0; i < 3; ++i) {
    const size_t colon = spec.find(':', start);
    if (colon == std::string::npos) break;
    parts.push_back(spec.substr(start, colon - start));
    start = colon + 1;
  }
  parts.push_back(spec.substr(start));
  if (parts.size() < 2 || parts[0].empty() || parts[1].empty()) {
    return usage_error(
        "--gpu takes TARGET:UUID[:MIG[:LAYOUT]], e.g. a100-80gb-sxm4:GPU-1234:dynamic; got '" + spec + "'", "gpu");
  }
  Json g{{"target", parts[0]}, {"uuid", parts[1]}, {"mig", parts.size() > 2 ? parts[2] : "none"}};
  if (parts.size() > 3) g["layout"] = parts[3];
  return g;
}

}  // namespace

void add_market_options(CLI::App& app) {
  MarketCli& st = state();
  app.add_option(
      "--server", st.server,
      "The market's server, http://HOST:PORT (default: GPUPLAN_SERVER, else " + std::string(kDefaultServer) + ")");
  app.add_option("--token", st.token, "API token for the market (default: GPUPLAN_TOKEN)");
}

void add_market_commands(CLI::App& app) {
  MarketCli& st = state();
  add_market_options(app);

  // admin init: the platform's first token, from the store itself.
  CLI::App* admin = app.add_subcommand("admin", "Set up a market's store");
  admin->require_subcommand(1);
  st.admin_init = admin->add_subcommand("init", "Create the platform admin and print its token once");
  st.admin_init->add_option("--data-dir", st.init_data_dir, "Data directory (SQLite DIR/gpuplan.db)");
  st.admin_init->add_option("--database", st.init_database, "postgresql://... instead of a data directory");
  st.admin_deliver = admin->add_subcommand(
      "deliver", "Hand the outbox's due rows to their engines (Slurm on PATH) once, as the server does every second");
  st.admin_deliver->add_option("--data-dir", st.deliver_data_dir, "Data directory (SQLite DIR/gpuplan.db)");
  st.admin_deliver->add_option("--database", st.deliver_database, "postgresql://... instead of a data directory");
  st.admin_deliver->add_flag("--once", st.deliver_once, "One pass (the only mode: the server runs the loop)");

  // nodes
  CLI::App* nodes = app.add_subcommand("nodes", "A provider's nodes in the market (needs --server)");
  nodes->require_subcommand(1);
  {
    CLI::App* a = nodes->add_subcommand("add", "Register a node and its GPUs");
    auto& name = str();
    auto& region = str();
    auto& ic = str();
    auto& gpus = lst();
    auto& vcpus = integer();
    auto& ram = integer();
    auto& disk = integer();
    auto& scheduler = str();
    auto& partition = str();
    auto& slurm_node = str();
    auto& ssh = str();
    auto& node_mig = str();
    a->add_option("--name", name, "Node name (unique for the provider)")->required();
    a->add_option("--region", region, "Region, e.g. eu-west")->required();
    a->add_option("--interconnect", ic, "nvlink or pcie")->default_str("pcie");
    a->add_option("--gpu", gpus, "TARGET:UUID[:MIG[:LAYOUT]] (repeat); MIG is none, static or dynamic")->required();
    a->add_option("--vcpus", vcpus, "vCPUs");
    a->add_option("--ram-gb", ram, "RAM in GB");
    a->add_option("--disk-gb", disk, "Disk in GB");
    a->add_option("--scheduler", scheduler, "Who runs its rentals: manual, slurm or kubernetes")->default_str("manual");
    a->add_option("--slurm-partition", partition, "--scheduler slurm: the partition of its holding jobs");
    a->add_option("--slurm-node", slurm_node, "--scheduler slurm: its NodeName in slurm.conf (default: --name)");
    a->add_option("--ssh", ssh, "user@host:port its renters reach it at (rentals access)");
    a->add_option("--mig-policy", node_mig,
                  "static (its agent only reads MIG) or dynamic (its agent, run --mig-policy dynamic, may "
                  "create and destroy GPU instances)")
        ->default_str("static");
    add(
        a,
        [&]() -> Result<Json> {
          Json body{{"name", name},         {"region", region}, {"interconnect", ic.empty() ? "pcie" : ic},
                    {"vcpus", vcpus},       {"ram_gb", ram},    {"disk_gb", disk},
                    {"gpus", Json::array()}};
          if (!scheduler.empty()) body["scheduler"] = scheduler;
          if (!partition.empty()) body["slurm_partition"] = partition;
          if (!slurm_node.empty()) body["slurm_node"] = slurm_node;
          if (!ssh.empty()) body["ssh"] = ssh;
          if (!node_mig.empty()) body["mig_policy"] = node_mig;
          for (const auto& g : gpus) {
            GPUPLAN_TRY(j, gpu_json(g));
            body["gpus"].push_back(j);
          }
          return call("POST", "/nodes", &body);
        },
        [](const Json& r) {
          std::string out = render_nodes(Json{{"nodes", Json::array({r})}});
          if (r.contains("enrollment_token") && r["enrollment_token"].is_string()) {
            // Shown once: `gpuplan agent --enroll TOKEN` on the node trades it for the agent's token.
            out += "enrollment token (one use, 24 h): " + r["enrollment_token"].get<std::string>() +
                   "\n  on the node: gpuplan agent --server URL --enroll TOKEN --token-file "
                   "/var/lib/gpuplan/agent.token\n";
          }
          return out;
        });
    CLI::App* l = nodes->add_subcommand("list", "List the provider's nodes");
    add(
        l, [] { return call("GET", "/nodes"); }, render_nodes);
    for (const char* verb : {"drain", "remove"}) {
      CLI::App* c = nodes->add_subcommand(
          verb, std::string(verb) == "drain" ? "Take no new rentals on a node" : "Remove a node without live rentals");
      auto& id = str();
      c->add_option("node", id, "Node id")->required();
      const bool drain = std::string(verb) == "drain";
      add(
          c, [&id, drain] { return drain ? call("POST", "/nodes/" + id + "/drain") : call("DELETE", "/nodes/" + id); },
          [drain](const Json& r) {
            return drain ? render_nodes(Json{{"nodes", Json::array({r})}}) : "removed " + s(r["id"]) + "\n";
          });
    }
    // Bench on request (issue #16): the node's agent runs `gpuplan bench --quick` at its next heartbeat.
    CLI::App* b = nodes->add_subcommand("bench", "Ask a node's agent to bench its GPUs again (bench --quick)");
    auto& bench_id = str();
    b->add_option("node", bench_id, "Node id")->required();
    add(
        b, [&bench_id] { return call("POST", "/nodes/" + bench_id + "/bench"); },
        [](const Json& r) {
          return "bench request " + s(r["bench_request"]) + " for node " + s(r["node_id"]) +
                 ": its agent benches at the next heartbeat (10 s) and reports each GPU\n";
        });
  }

  // offers create / delete (offers list exists: with --server it lists the market)
  if (CLI::App* offers = app.get_subcommand("offers")) {
    st.offers_list = offers->get_subcommand("list");
    CLI::App* c = offers->add_subcommand("create", "Publish an offer on your inventory (needs --server)");
    auto& target = str();
    auto& region = str();
    auto& price = num();
    auto& gpus = integer();
    auto& min_s = integer();
    c->add_option("--target", target, "GPU (a100-80gb-sxm4) or MIG profile (a100-80gb-sxm4/1g.10gb)")->required();
    c->add_option("--region", region, "Region")->required();
    c->add_option("--price-per-hour", price, "Dollars per hour per rental unit")->required();
    c->add_option("--gpus", gpus, "GPUs per rental (1, 2, 4, 8)");
    c->add_option("--min-billable-seconds", min_s, "Minimum billed time of a rental");
    add(
        c,
        [&] {
          Json body{{"target", target}, {"region", region}, {"price_per_hour", price}};
          if (gpus > 0) body["gpus"] = gpus;
          if (min_s > 0) body["min_billable_seconds"] = min_s;
          return call("POST", "/offers", &body);
        },
        [](const Json& r) {
          return render_offers(Json{{"offers", Json::array({r})}});
        });
    CLI::App* d = offers->add_subcommand("delete", "Withdraw an offer (rentals keep it)");
    auto& id = str();
    d->add_option("offer", id, "Offer id")->required();
    add(
        d, [&id] { return call("DELETE", "/offers/" + id); },
        [](const Json& r) { return "deleted " + s(r["id"]) + "\n"; });
  }

  // rent
  {
    CLI::App* r = app.add_subcommand("rent", "Rent an offer: whole GPUs or MIG slices (needs --server)");
    auto& offer = str();
    auto& hours = num();
    auto& key = str();
    auto& tpl = str();
    r->add_option("offer", offer, "Offer id (gpuplan offers list --server URL); or --plan");
    r->add_flag("--plan", st.rent_with_plan,
                "Plan on the server's live offers (the options of `gpuplan plan`) and rent the recommended "
                "option's instances, all or nothing");
    // The plan's own options, from their one declaration; none is required here (--plan needs --model).
    static constexpr CommandRow kRentPlanRow{
        .path = "rent", .command = "plan", .render = render_plan, .prepare = read_model_file};
    st.rent_plan = std::make_unique<CliCommand>();
    st.rent_plan->row = &kRentPlanRow;
    st.rent_plan->app = r;
    add_declared_options(*st.rent_plan);
    // The plan declares --count too (devices per target); on `rent` it is the rent's units, so it is
    // one option: read here, never sent with --plan (the plan says how many instances).
    const Opt* count = nullptr;
    for (auto& o : st.rent_plan->opts) {
      o.option->required(false);
      if (o.key == "count") {
        o.option->description("Rental units of the offer (default 1); not with --plan");
        count = &o;
      }
    }
    if (count == nullptr) count = &st.rent_plan->value("count", "Rental units of the offer (default 1)");
    r->add_option("--hours", hours, "End the rental after this many hours (default: until deleted)");
    r->add_option("--idempotency-key", key,
                  "The same key returns the same rental (safe retries); default: a fresh random key per call");
    r->add_option("--template", tpl, "What it starts with: pytorch, tensorflow, cuda");
    add(
        r,
        [&, count]() -> Result<Json> {
          Json body = Json::object();
          if (st.rent_with_plan) {
            if (!offer.empty()) return usage_error("give an offer id or --plan, not both", "plan");
            if (count->option->count() > 0)
              return usage_error("--count is the rent of one offer: drop it with --plan", "count");
            GPUPLAN_TRY(built, st.rent_plan->request());
            GPUPLAN_TRY(plan, read_model_file(built));
            if (!plan.contains("model")) return usage_error("--plan needs --model (and the goal: --rate ...)", "model");
            body["plan"] = plan;
          } else {
            if (offer.empty())
              return usage_error("give an offer id (gpuplan offers list --server URL) or --plan", "offer");
            body["offer"] = offer;
            const auto units = count->option->count() > 0 ? parse_decimal(count->value) : std::optional<double>(1);
            if (!units || *units < 1 || *units != static_cast<double>(static_cast<int64_t>(*units))) {
              return usage_error("--count must be a whole number of rental units, 1 or more", "count");
            }
            body["count"] = static_cast<int64_t>(*units);
          }
          if (hours > 0) body["hours"] = hours;
          // Always a key: if the store's connection drops during COMMIT, the server reruns the rent, and
          // the key makes the rerun return the rental that did commit instead of placing a second one.
          body["idempotency_key"] = key.empty() ? random_idempotency_key() : key;
          if (!tpl.empty()) body["template"] = tpl;
          return call("POST", "/rentals", &body);
        },
        [](const Json& answer) {
          return answer.contains("rentals") ? render_plan_rentals(answer) : render_rental(answer);
        });
  }

  // rentals
  {
    CLI::App* rentals = app.add_subcommand("rentals", "Your rentals (needs --server)");
    rentals->require_subcommand(1);
    CLI::App* l = rentals->add_subcommand("list", "List your rentals");
    add(
        l, [] { return call("GET", "/rentals"); }, render_rentals);
    CLI::App* sh = rentals->add_subcommand("show", "One rental and its placements");
    auto& sid = str();
    sh->add_option("rental", sid, "Rental id")->required();
    add(
        sh, [&sid] { return call("GET", "/rentals/" + sid); }, render_rental);
    for (const char* verb : {"stop", "start", "delete"}) {
      CLI::App* c = rentals->add_subcommand(verb, std::string("Rental: ") + verb);
      auto& id = str();
      auto& version = str();
      c->add_option("rental", id, "Rental id")->required();
      c->add_option("--if-match", version, "Only if the rental is still at this version (412 otherwise)");
      const std::string v(verb);
      add(
          c,
          [&id, &version, v] {
            if (v == "delete") return call("DELETE", "/rentals/" + id, nullptr, if_match_header(version));
            std::string path = "/rentals/" + id;
            path.append("/").append(v);
            return call("POST", path, nullptr, if_match_header(version));
          },
          render_rental);
    }
    CLI::App* ac = rentals->add_subcommand(
        "access", "How to reach a rental: Slurm job and srun line, Pod and a one-hour token, or SSH");
    auto& aid = str();
    ac->add_option("rental", aid, "Rental id")->required();
    add(
        ac, [&aid] { return call("GET", "/rentals/" + aid + "/access"); },
        [](const Json& r) {
          std::string out = s(r["rental_id"]) + " " + s(r["state"]) + " on " + s(r["kind"]);
          if (r.contains("node") && r["node"].is_string()) out += " node " + s(r["node"]);
          out += "\n";
          for (const char* k : {"external_id", "command", "ssh", "namespace", "pod", "server", "token", "note"}) {
            if (r.contains(k) && r[k].is_string()) out += std::string("  ") + k + ": " + s(r[k]) + "\n";
          }
          return out;
        });
    CLI::App* ev = rentals->add_subcommand("events", "A rental's history");
    auto& eid = str();
    ev->add_option("rental", eid, "Rental id")->required();
    add(
        ev, [&eid] { return call("GET", "/rentals/" + eid + "/events"); },
        [](const Json& r) {
          return table(r["events"], {"seq", "at_ms", "from", "to", "actor", "reason"},
                       {"seq", "at_ms", "from", "to", "actor", "reason"}, "no events");
        });
  }

  // usage, earnings
  {
    CLI::App* u = app.add_subcommand("usage", "Your tenant's metered usage and charges (needs --server)");
    static bool earnings = false;  // CLI11 keeps a pointer: one per process, like the app
    u->add_flag("--earnings", earnings, "A provider's earnings instead");
    add(
        u, [] { return call("GET", earnings ? "/provider/earnings" : "/usage"); }, render_usage);
  }

  // tenants, tokens
  {
    CLI::App* tenants = app.add_subcommand("tenants", "Market tenants (platform admin; needs --server)");
    tenants->require_subcommand(1);
    CLI::App* c = tenants->add_subcommand("create", "Create a renter or provider tenant");
    auto& name = str();
    auto& kind = str();
    auto& limit = integer();
    c->add_option("name", name, "Tenant name")->required();
    c->add_option("--kind", kind, "renter or provider")->default_str("renter");
    c->add_option("--credit-limit", limit, "Credit limit in micro-dollars (default: unlimited)");
    add(
        c,
        [&] {
          Json body{{"name", name}, {"kind", kind.empty() ? "renter" : kind}};
          if (limit > 0) body["credit_limit"] = limit;
          return call("POST", "/tenants", &body);
        },
        render_id);
    CLI::App* u = tenants->add_subcommand("add-user", "Add a user to a tenant");
    auto& tenant = str();
    auto& uname = str();
    auto& role = str();
    u->add_option("tenant", tenant, "Tenant id")->required();
    u->add_option("--name", uname, "User name")->required();
    u->add_option("--role", role, "admin, member or viewer")->default_str("member");
    add(
        u,
        [&] {
          Json body{{"name", uname}, {"role", role.empty() ? "member" : role}};
          return call("POST", "/tenants/" + tenant + "/users", &body);
        },
        render_id);

    CLI::App* tokens = app.add_subcommand("tokens", "API tokens (needs --server)");
    tokens->require_subcommand(1);
    CLI::App* tc = tokens->add_subcommand("create", "Create a token for a user (printed once)");
    auto& user = str();
    tc->add_option("--user-id", user, "The user (default: yourself)");
    add(
        tc,
        [&user] {
          Json body = Json::object();
          if (!user.empty()) body["user_id"] = user;
          return call("POST", "/tokens", &body);
        },
        render_id);
    CLI::App* tr = tokens->add_subcommand("revoke", "Revoke a token");
    auto& tid = str();
    tr->add_option("token", tid, "Token id")->required();
    add(
        tr, [&tid] { return call("DELETE", "/tokens/" + tid); },
        [](const Json& r) { return "revoked " + s(r["id"]) + "\n"; });
  }
}

std::optional<Result<Json>> remote_command(std::string_view command, const Json& request) {
  if (state().server.empty()) return std::nullopt;
  std::string path;
  if (command == "plan") {
    path = "/plan";
  } else if (command == "catalog.list") {
    path = "/catalog/list";
  } else if (command == "catalog.show") {
    path = "/catalog/show";
  } else {
    return std::nullopt;
  }
  return call("POST", path, &request);
}

bool market_requested() {
  const MarketCli& st = state();
  if (st.admin_init && st.admin_init->parsed()) return true;
  if (st.admin_deliver && st.admin_deliver->parsed()) return true;
  if (st.offers_list && st.offers_list->parsed() && !st.server.empty()) return true;
  for (const auto& c : st.calls) {
    if (c.app->parsed()) return true;
  }
  return false;
}

int run_market(const OutputFormat& fmt, const std::function<int(Error)>& report) {
  MarketCli& st = state();
  if (st.admin_init && st.admin_init->parsed()) {
    if (st.init_data_dir.empty() == st.init_database.empty()) {
      return report(usage_error("admin init needs --data-dir DIR or --database postgresql://... (one)", "data-dir"));
    }
    auto db = market::open_store(st.init_database.empty() ? st.init_data_dir : st.init_database);
    if (!db) return report(db.error());
    auto m = market::Market::open(std::move(*db));
    if (!m) return report(m.error());
    auto token = (*m)->init_platform();
    if (!token) {
      Error e = token.error();
      if (e.code == ErrorCode::kConflict) e.message = "this market is already initialised (" + e.message + ")";
      return report(e);
    }
    if (fmt.json) {
      std::cout << Json{{"token", token->token}, {"id", token->id}, {"user_id", token->user_id}}.dump(2) << "\n";
    } else {
      std::cout << "platform admin token (shown once; keep it):\n" << token->token << "\n";
    }
    return 0;
  }
  if (st.admin_deliver && st.admin_deliver->parsed()) {
    if (st.deliver_data_dir.empty() == st.deliver_database.empty()) {
      return report(usage_error("admin deliver needs --data-dir DIR or --database postgresql://... (one)", "data-dir"));
    }
    auto db = market::open_store(st.deliver_database.empty() ? st.deliver_data_dir : st.deliver_database);
    if (!db) return report(db.error());
    market::MarketOptions options;
    options.targets.push_back(std::shared_ptr<handoff::HandoffTarget>(handoff::make_slurm_target()));
    auto m = market::Market::open(std::move(*db), nullptr, options);
    if (!m) return report(m.error());
    auto r = (*m)->deliver_outbox();
    if (!r) return report(r.error());
    const Json j{{"delivered", r->delivered},
                 {"retried", r->retried},
                 {"failed", r->failed},
                 {"running", r->running},
                 {"waiting", r->waiting}};
    std::cout << (fmt.json ? j.dump(2) : j.dump()) << "\n";
    return 0;
  }
  if (st.offers_list && st.offers_list->parsed()) {
    auto body = offers_list_body(*st.offers_list);
    if (!body) return report(body.error());
    auto r = call("POST", "/offers/list", &*body);
    if (!r) return report(r.error());
    std::cout << (fmt.json ? r->dump(2) + "\n" : render_offer_rows(*r));
    return 0;
  }
  for (const auto& c : st.calls) {
    if (!c.app->parsed()) continue;
    auto r = c.run();
    if (!r) return report(r.error());
    std::cout << (fmt.json ? r->dump(2, ' ', false, Json::error_handler_t::replace) + "\n" : c.render(*r));
    return 0;
  }
  return report(usage_error("no market command given", "command"));
}

}  // namespace gpuplan::cli

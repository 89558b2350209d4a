// The Router: HTTP requests onto gpuplan commands. No sockets and no files here (see server.h).
#include <malloc.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "gpuplan/embedded.h"
#include "gpuplan/version.h"
#include "server/market_routes.h"
#include "server/server.h"

namespace gpuplan::server {

namespace {

// A light-lane request's body may be this large (a catalog.show by POST is under 200 bytes); larger
// bodies are parsed on the heavy lane.
constexpr std::size_t kLightBodyBytes = 4096;
// Queued jobs a heavy worker may have waiting: a burst of the page's requests from a few users; a
// queued job whose deadline passes is dropped unrun. Each queue also holds at least max_connections
// jobs: the Server has at most one request of a connection in flight, so through the Server a queue
// never overflows while the connection cap holds (256 wrk connections got 503 busy with 2 x 64).
constexpr std::size_t kHeavyQueuePerWorker = 64;
// Workers and queue of the light lane: catalog and MIG table reads cost ~0.1-1 ms each.
constexpr int kLightWorkers = 2;
constexpr std::size_t kLightQueue = 256;
// What api() in planning mode names for a market route (not a command: market_routes.h answers it).
constexpr std::string_view kMarketCommand = "market";

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    if (slash > start) out.emplace_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, size_t from, char sep) {
  std::string out;
  for (size_t i = from; i < parts.size(); ++i) {
    if (i > from) out += sep;
    out += parts[i];
  }
  return out;
}

// Query parameters as a request: `-` in keys becomes `_` (the CLI's long options), a repeated key
// becomes a list, a key without a value is a flag that is set.
Json query_json(const std::vector<std::pair<std::string, std::string>>& query) {
  Json out = Json::object();
  for (const auto& [raw_key, value] : query) {
    std::string key = raw_key;
    std::replace(key.begin(), key.end(), '-', '_');
    Json v = value.empty() ? Json(true) : Json(value);
    if (!out.contains(key)) {
      out[key] = std::move(v);
    } else {
      Json& slot = out[key];
      if (!slot.is_array()) slot = Json::array({slot});
      slot.push_back(std::move(v));
    }
  }
  return out;
}

bool is_loopback_name(std::string_view host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host == "[::1]";
}

// The Host header without its port.
std::string_view host_name(std::string_view host) {
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    return close == std::string_view::npos ? host : host.substr(0, close + 1);
  }
  const size_t colon = host.rfind(':');
  return colon == std::string_view::npos ? host : host.substr(0, colon);
}

struct Asset {
  std::string_view contents;
  std::string content_type;
  std::string etag;
};

std::string content_type_for(std::string_view path) {
  auto ends = [&](std::string_view ext) {
    return path.size() >= ext.size() && path.substr(path.size() - ext.size()) == ext;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".json")) return "application/json";
  if (ends(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

// FNV-1a: a strong enough ETag for files that only change with the binary.
std::string etag_of(std::string_view s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (int i = 15; i >= 0; --i) out += kHex[(h >> (i * 4)) & 0xF];
  return out + "\"";
}

// web/openapi.json says "version": "@GPUPLAN_VERSION@"; the served document carries the build's version
// (generated/gpuplan/version.h, from CMake), so the version is written in one place.
std::string_view openapi_with_version(std::string_view text) {
  static constexpr std::string_view kPlaceholder = "@GPUPLAN_VERSION@";
  static const std::string doc = [&] {
    std::string out(text);
    if (const size_t at = out.find(kPlaceholder); at != std::string::npos)
      out.replace(at, kPlaceholder.size(), kVersion);
    return out;
  }();
  return doc;
}

// web/ files, by URL path ("/" is web/index.html).
const std::map<std::string, Asset, std::less<>>& assets() {
  static const auto* const map = [] {
    auto* m = new std::map<std::string, Asset, std::less<>>();
    for (const auto& f : embedded_files()) {
      if (f.path.substr(0, 4) != "web/") continue;
      const std::string url(f.path.substr(3));
      std::string_view contents = f.contents;
      if (url == "/openapi.json") contents = openapi_with_version(contents);
      (*m)[url] = Asset{contents, content_type_for(f.path), etag_of(contents)};
      if (url == "/index.html") (*m)["/"] = Asset{f.contents, content_type_for(f.path), etag_of(f.contents)};
    }
    return m;
  }();
  return *map;
}

// The commands a full build serves, with no list of their own (issue #12): the library's command table
// and every operation web/openapi.json documents (`operationId` mig_check is the command mig.check; the
// market's operations are routes, not commands). A router given fewer commands (a smaller build, a test)
// tells "not in this build" (404 unknown_command) from "no such route" (404 not_found) by it.
const std::vector<std::string>& known_commands() {
  static const std::vector<std::string> known = [] {
    std::vector<std::string> out = command_names();
    const auto& a = assets();
    const auto doc_file = a.find(std::string_view("/openapi.json"));
    if (doc_file == a.end()) return out;
    const Json doc = Json::parse(doc_file->second.contents, nullptr, false);
    if (!doc.is_object() || !doc.contains("paths") || !doc["paths"].is_object()) return out;
    for (const auto& item : doc["paths"]) {
      if (!item.is_object()) continue;
      for (const auto& op : item) {
        if (!op.is_object() || !op.contains("operationId") || !op["operationId"].is_string()) continue;
        if (op.value("x-gpuplan-market", false)) continue;
        std::string command = op["operationId"].get<std::string>();
        std::replace(command.begin(), command.end(), '_', '.');
        if (std::find(out.begin(), out.end(), command) == out.end()) out.push_back(std::move(command));
      }
    }
    return out;
  }();
  return known;
}

void add_security_headers(HttpResponse& res) {
  for (const auto& h : security_headers()) res.headers.push_back(h);
}

HttpResponse json_response(int status, const Json& body) {
  HttpResponse res;
  res.status = status;
  res.body = dump(body);
  res.headers.emplace_back("Cache-Control", "no-store");
  return res;
}

// The media type of a Content-Type header, lower case, without parameters.
std::string media_type(std::string_view content_type) {
  return lower(trim(content_type.substr(0, content_type.find(';'))));
}

bool is_json_media(std::string_view media) {
  return media == "application/json" || (media.size() > 5 && media.ends_with("+json"));
}

// Refusals of a POST body found from its headers and size alone (no parsing): 413 over the limit;
// 415 for any media type but JSON, even with an empty body, because a cross-site form always sends
// one (urlencoded, multipart or text/plain) and must never run a command. A POST with no Content-Type
// at all and an empty body is an empty request: no form and no fetch() without a preflight sends that.
std::optional<HttpResponse> refuse_body(const HttpRequest& req, size_t max_bytes) {
  if (req.body.size() > max_bytes) {
    return error_response(413, "payload_too_large",
                          "the request body is larger than " + std::to_string(max_bytes) + " bytes", "body");
  }
  const std::string media = media_type(req.content_type);
  if (media.empty() && trim(req.body).empty()) return std::nullopt;
  if (!is_json_media(media)) {
    return error_response(415, "unsupported_media_type",
                          "send the request as JSON with Content-Type: application/json" +
                              (media.empty() ? std::string() : " (got " + media + ")"),
                          "Content-Type");
  }
  return std::nullopt;
}

// The JSON object in a POST body, or the response that refuses it (limits, syntax, not an object).
// An empty body is an empty request.
std::optional<HttpResponse> read_body(const HttpRequest& req, const JsonLimits& limits, Json& out) {
  if (trim(req.body).empty()) return std::nullopt;
  if (Status bounded = check_json_body(req.body, limits); !bounded) {
    return json_response(400, error_json(bounded.error()));
  }
  try {
    out = Json::parse(req.body);
  } catch (const Json::exception& e) {
    std::string what = e.what();
    if (const size_t pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
    return json_response(400, error_json(usage_error("malformed JSON: " + what, "body")));
  }
  if (!out.is_object()) {
    return json_response(400, error_json(usage_error("the request body must be a JSON object of options, e.g. "
                                                     "{\"gpu\": [\"a100-40gb-sxm4\"]}; got " +
                                                         std::string(out.type_name()),
                                                     "body")));
  }
  return std::nullopt;
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& security_headers() {
  static const std::vector<std::pair<std::string, std::string>> headers = {
      {"Content-Security-Policy",
       "default-src 'self'; img-src 'self' data: blob:; object-src 'none'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'"},
      {"X-Content-Type-Options", "nosniff"},
      {"X-Frame-Options", "DENY"},
      {"Referrer-Policy", "no-referrer"},
      {"Cross-Origin-Opener-Policy", "same-origin"},
      {"Cross-Origin-Resource-Policy", "same-origin"},
  };
  return headers;
}

// A fixed set of worker threads that run commands, so that a request can stop waiting for a command
// that runs past the time limit. The queue is bounded: when it is full the server is busy (503).
class ComputePool {
 public:
  // `trim_when_idle`: return freed heap pages to the system each time the pool falls idle.
  ComputePool(int threads, size_t capacity, bool trim_when_idle = false)
      : capacity_(capacity), trim_when_idle_(trim_when_idle) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  ~ComputePool() {
    std::deque<std::function<void()>> dropped;  // queued jobs are not run at shutdown
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      dropped.swap(queue_);
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  ComputePool(const ComputePool&) = delete;
  ComputePool& operator=(const ComputePool&) = delete;

  bool submit(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.size() >= capacity_) return false;
      queue_.push_back(std::move(job));
    }
    cv_.notify_one();
    return true;
  }

  // Jobs queued or running now.
  size_t jobs() {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size() + running_;
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        job = std::move(queue_.front());
        queue_.pop_front();
        ++running_;
      }
      job();
      job = nullptr;  // what the job held goes before it counts as done
      bool idle = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        --running_;
        idle = running_ == 0 && queue_.empty();
      }
      // glibc keeps freed pages in its per-thread arenas; a large command (a 10,000-GPU pack holds
      // hundreds of MB) would leave the process that big. When the pool falls idle, hand them back.
      if (idle && trim_when_idle_) ::malloc_trim(0);
    }
  }

  size_t capacity_;
  bool trim_when_idle_;
  size_t running_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

HttpResponse error_response(int status, std::string_view code, std::string_view message, std::string_view field) {
  Json e{{"code", code}, {"message", message}};
  e["field"] = field.empty() ? Json(nullptr) : Json(field);
  return json_response(status, Json{{"error", std::move(e)}});
}

HttpResponse busy_response() {
  auto res = error_response(503, "busy", "the server is busy; try again in a moment");
  res.headers.emplace_back("Retry-After", "1");
  return res;
}

HttpResponse timeout_response(const Options& options) {
  return error_response(503, "timeout",
                        "the request took longer than the server's deadline of " +
                            std::to_string(options.request_deadline.count()) +
                            " ms (reading, running and answering it); ask for less, or run it with the gpuplan CLI");
}

Router::Router(Runner runner, std::vector<std::string> commands, Options options)
    : runner_(std::make_shared<const Runner>(std::move(runner))),
      commands_(std::move(commands)),
      options_(std::move(options)) {
  const int threads =
      options_.threads > 0 ? options_.threads : static_cast<int>(std::max(2U, std::thread::hardware_concurrency()));
  const auto connections = static_cast<size_t>(std::max(1, options_.max_connections));
  heavy_ =
      std::make_unique<ComputePool>(threads, std::max(static_cast<size_t>(threads) * kHeavyQueuePerWorker, connections),
                                    /*trim_when_idle=*/true);
  light_ = std::make_unique<ComputePool>(kLightWorkers, std::max(kLightQueue, connections));
  if (options_.market) {
    market_ = std::make_unique<ComputePool>(std::max(1, options_.market_threads), std::max(kLightQueue, connections));
  }
}
Router::~Router() = default;
Router::Router(Router&&) noexcept = default;
Router& Router::operator=(Router&&) noexcept = default;

HttpResponse Router::finish(const HttpRequest& req, HttpResponse res) const {
  if (req.method == "HEAD") {
    // The length GET would have, without the body (RFC 9110 9.3.2).
    if (res.status != 304) res.headers.emplace_back("Content-Length", std::to_string(res.body.size()));
    res.body.clear();
  }
  add_security_headers(res);
  return res;
}

Router::Plan Router::plan(const HttpRequest& req) const {
  Plan out;
  try {
    if (is_loopback_name(options_.host) && !req.host.empty() && !is_loopback_name(host_name(req.host))) {
      // A page on another site must not reach a loopback server by pointing its own name at 127.0.0.1.
      out.now = error_response(403, "forbidden",
                               "this server answers only requests addressed to localhost or 127.0.0.1", "Host");
    } else if (req.path == "/api" || req.path.starts_with("/api/")) {
      HttpResponse res = api(req, req.path, nullptr);
      if (res.status != 0) {
        out.now = std::move(res);
      } else {
        const std::string command = res.body;  // api() in planning mode names the command here
        if (command == kMarketCommand) {
          out.lane = Lane::kMarket;
          return out;
        }
        out.lane = command_is_light(command) && req.body.size() <= kLightBodyBytes ? Lane::kLight : Lane::kHeavy;
      }
    } else {
      out.now = asset(req);
    }
  } catch (const std::exception& e) {
    out.now = error_response(500, "internal", std::string("internal error: ") + e.what());
  }
  if (out.now) out.now = finish(req, std::move(*out.now));
  return out;
}

HttpResponse Router::respond(const HttpRequest& req, const CancelToken& token) const {
  HttpResponse res;
  try {
    if (token.cancelled()) {
      res = timeout_response(options_);
    } else {
      CancelScope scope(&token);
      res = api(req, req.path, &token);
    }
  } catch (const std::exception& e) {
    res = error_response(500, "internal", std::string("internal error: ") + e.what());
  }
  return finish(req, std::move(res));
}

std::size_t Router::jobs() const { return heavy_->jobs() + light_->jobs() + (market_ ? market_->jobs() : 0); }

bool Router::submit(Lane lane, std::function<void()> job) const {
  if (lane == Lane::kMarket && market_) return market_->submit(std::move(job));
  return (lane == Lane::kLight ? light_ : heavy_)->submit(std::move(job));
}

HttpResponse Router::handle(const HttpRequest& req) const {
  Plan p = plan(req);
  if (p.now) return std::move(*p.now);
  auto token = std::make_shared<CancelToken>(CancelToken::Clock::now() + options_.request_deadline);
  auto promise = std::make_shared<std::promise<HttpResponse>>();
  auto future = promise->get_future();
  // The job holds what it needs by value: handle() may return (at the deadline) before it runs.
  const bool queued = submit(p.lane, [this, promise, token, req] {
    try {
      promise->set_value(respond(req, *token));
    } catch (...) {
      promise->set_value(finish(req, error_response(500, "internal", "internal server error")));
    }
  });
  if (!queued) return finish(req, busy_response());
  if (future.wait_until(token->deadline()) != std::future_status::ready) {
    token->cancel();
    return finish(req, timeout_response(options_));
  }
  return future.get();
}

// Planning (token == nullptr): a response with status 0 and the command's name as its body means
// "run it"; anything else is the answer. Running (token set): the command's response.
HttpResponse Router::api(const HttpRequest& req, std::string_view path, const CancelToken* token) const {
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post = req.method == "POST";
  constexpr std::string_view kPrefix = "/api/v1";
  if (!(path == kPrefix || path.starts_with("/api/v1/"))) {
    return error_response(404, "not_found", "no such API version; the API is under /api/v1", "path");
  }
  const auto segs = split_path(path.substr(kPrefix.size()));
  if (is_market_route(req, segs)) {
    if (!options_.market) return market_disabled_response();
    if (token == nullptr) {
      HttpResponse run_it;
      run_it.status = 0;
      run_it.body = std::string(kMarketCommand);
      return run_it;
    }
    Json body = Json::object();
    if (post || req.method == "PUT") {  // PUT: /agent/inventory
      if (auto refused = refuse_body(req, options_.max_body_bytes)) return *refused;
      if (auto refused = read_body(req, options_.json, body)) return *refused;
    }
    // POST /rentals {"plan": ...} plans as POST /plan does (the files and a fresh market snapshot added).
    const PlanRunner plan = [runner = runner_](const Json& request) { return (*runner)("plan", request); };
    return market_response(*options_.market, req, segs, body, plan);
  }
  if (!get && !post) {
    auto res =
        error_response(405, "method_not_allowed",
                       "use GET or POST; " + req.method + " is not served (and no cross-origin access)", "method");
    res.headers.emplace_back("Allow", "GET, HEAD, POST");
    return res;
  }
  if (segs.empty() || (segs.size() == 1 && (segs[0] == "health" || segs[0] == "openapi.json"))) {
    if (!get) {
      auto res = error_response(405, "method_not_allowed", "this resource is read with GET", "method");
      res.headers.emplace_back("Allow", "GET, HEAD");
      return res;
    }
    if (!segs.empty() && segs[0] == "openapi.json") {
      const auto& a = assets();
      auto it = a.find(std::string_view("/openapi.json"));
      if (it == a.end()) return error_response(404, "not_found", "this build has no OpenAPI document");
      HttpResponse res;
      res.body = std::string(it->second.contents);
      res.headers.emplace_back("Cache-Control", "no-cache");
      return res;
    }
    Json body{{"status", "ok"}, {"version", kVersion}, {"commands", commands_}, {"openapi", "/api/v1/openapi.json"}};
    return json_response(200, body);
  }

  if (post) {
    if (auto refused = refuse_body(req, options_.max_body_bytes)) return *refused;
  }
  // The request: query parameters for GET, the JSON body for POST, then parameters from the path.
  Json request = Json::object();
  const std::string command = command_for(segs, request);
  if (!has_command(command)) {
    auto is_known = [](const std::string& c) {
      const auto& known = known_commands();
      return std::find(known.begin(), known.end(), c) != known.end();
    };
    // A family's route (/models) names its list command (models.list) when the build lacks it.
    const std::string missing = is_known(command) ? command : command + ".list";
    if (is_known(missing)) {
      return error_response(
          404, "unknown_command",
          "'" + missing + "' is not available in this build of gpuplan; it has: " + join(commands_, 0, ','), "command");
    }
    return error_response(404, "not_found",
                          "no API route " + req.method + " " + req.path + "; the routes are in /api/v1/openapi.json",
                          "path");
  }
  if (token == nullptr) {
    HttpResponse run_it;
    run_it.status = 0;
    run_it.body = command;
    return run_it;
  }
  Json input = Json::object();
  if (get) {
    input = query_json(req.query);
  } else if (auto refused = read_body(req, options_.json, input)) {
    return *refused;
  }
  for (auto& [k, v] : request.items()) input[k] = std::move(v);  // path parameters win
  return run(command, input, *token);
}

bool Router::has_command(std::string_view name) const {
  return std::find(commands_.begin(), commands_.end(), name) != commands_.end();
}

std::string Router::command_for(const std::vector<std::string>& segs, Json& request) const {
  if (segs[0] == "gpus") {
    if (segs.size() == 1) return "catalog.list";
    request["gpu"] = join(segs, 1, '/');  // MIG profiles: /gpus/a100-40gb-sxm4/3g.20gb
    return "catalog.show";
  }
  if (segs[0] == "mig" && segs.size() == 3 && (segs[2] == "profiles" || segs[2] == "layouts")) {
    request["gpu"] = segs[1];
    return "mig." + segs[2];
  }
  std::string command = join(segs, 0, '.');  // /fit -> fit, /mig/check -> mig.check
  // A family's list command answers for the family: /offers -> offers.list.
  if (!has_command(command) && has_command(command + ".list")) command += ".list";
  return command;
}

HttpResponse Router::run(std::string_view command, const Json& request, const CancelToken& token) const {
  Result<Json> result = Error{ErrorCode::kInternal, "internal error: the command did not run", ""};
  try {
    result = (*runner_)(command, request);
  } catch (const std::exception& e) {
    result = Error{ErrorCode::kInternal, std::string("internal error: ") + e.what(), ""};
  }
  if (token.cancelled() || (!result && result.error().code == ErrorCode::kCancelled)) {
    return timeout_response(options_);
  }
  if (!result) return json_response(http_status(result.error().code), error_json(result.error()));
  HttpResponse res;
  res.headers.emplace_back("Cache-Control", "no-store");
  switch (dump_bounded(*result, options_.max_response_bytes, res.body)) {
    case DumpStatus::kOk:
      return res;
    case DumpStatus::kCancelled:
      return timeout_response(options_);
    case DumpStatus::kTooLarge:
      break;
  }
  return json_response(
      413, error_json(limit_error("the answer to '" + std::string(command) + "' is larger than the server's limit of " +
                                      std::to_string(options_.max_response_bytes) +
                                      " bytes; ask for fewer GPUs, models, layouts or results at once",
                                  "max_response_bytes")));
}

HttpResponse Router::asset(const HttpRequest& req) const {
  if (req.method != "GET" && req.method != "HEAD") {
    auto res = error_response(405, "method_not_allowed", "the page is read with GET", "method");
    res.headers.emplace_back("Allow", "GET, HEAD");
    return res;
  }
  const auto& a = assets();
  auto it = a.find(std::string_view(req.path));
  if (it == a.end()) return error_response(404, "not_found", "no such page: " + req.path, "path");
  HttpResponse res;
  res.headers.emplace_back("ETag", it->second.etag);
  res.headers.emplace_back("Cache-Control", "no-cache");
  res.content_type = it->second.content_type;
  if (req.if_none_match == it->second.etag) {
    res.status = 304;
    return res;
  }
  res.body = std::string(it->second.contents);
  return res;
}

Router make_router(const Context& ctx, const Options& options) {
  Runner runner = [ctx, offers = options.default_offers, market = options.market](std::string_view command,
                                                                                  const Json& request) -> Result<Json> {
    // The commands that price things (compare only when asked: a workload or an offer filter) get
    // --offers FILE when a request brings no offers, and on a server with a store a snapshot of the
    // market's live offers as `market` (unless the request asks for files only), in place of any the
    // request brought: the market's rows are the store's, not the client's.
    const bool prices = command == "plan" || command == "offers.list" ||
                        (command == "compare" &&
                         (request.contains("model") || request.contains("spot") || request.contains("provider") ||
                          request.contains("region") || request.contains("max_age") || request.contains("source")));
    const bool add_files = offers && prices && !request.contains("offers");
    const bool files_only = request.contains("source") && request["source"] == "files";
    const bool add_market = market && prices && !files_only;
    // The catalog says what is available now (issue #14): on a server with a store, catalog.list and
    // catalog.show get the market's live offers and the store's last-available times as `market`.
    if (market && (command == "catalog.list" || command == "catalog.show")) {
      auto availability = market_availability_snapshot(*market);
      if (!availability) return availability.error();
      Json with = request;
      with["market"] = std::move(*availability);
      return run_command(ctx, command, with);
    }
    if (!add_files && !add_market) return run_command(ctx, command, request);
    Json with = request;
    if (add_files) with["offers"] = *offers;
    if (add_market) {
      auto snapshot = market_offers_snapshot(*market);
      if (!snapshot) return snapshot.error();
      with["market"] = std::move(*snapshot);
    }
    return run_command(ctx, command, with);
  };
  return Router(std::move(runner), command_names(), options);
}

}  // namespace gpuplan::server

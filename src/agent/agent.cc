// The node agent's loop (agent.h): enrol, PUT the inventory, heartbeat, back off on errors.
#include "agent/agent.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <future>
#include <ostream>
#include <random>
#include <set>
#include <thread>

#include "core/http_client.h"

namespace gpuplan::agent {

namespace {

constexpr size_t kMaxTokenFileBytes = 256;  // a token is under 100 bytes
constexpr int kMinHeartbeatSeconds = 1;     // the server's interval is clamped to [1, 300] s
constexpr int kMaxHeartbeatSeconds = 300;
constexpr auto kStopPoll = std::chrono::milliseconds(100);  // how soon a sleeping agent sees SIGTERM
constexpr int64_t kMaxPlacementStart = 63;  // memory slices of a GPU are 8; a larger start is refused by NVML

struct Answer {
  int status = 0;  // 0: no answer (connection refused, timeout)
  Json body;
  std::string transport_error;
};

Answer http_call(const std::string& server, const std::string& method, const std::string& path,
                 const std::string& token, const Json& body) {
  Answer a;
  auto url = http::parse_url(server, "server");
  if (!url) {
    a.transport_error = url.error().message;
    return a;
  }
  const std::string payload = body.dump(-1, ' ', false, Json::error_handler_t::replace);
  auto res = http::send(*url, http::api_request(method, path, token, &payload));
  if (!res) {
    a.transport_error = res.error().message;
    return a;
  }
  a.status = res->status;
  a.body = Json::parse(res->body, nullptr, false);
  if (a.body.is_discarded()) a.body = Json::object();
  return a;
}

std::string error_text(const Answer& a) {
  if (a.status == 0) return "no answer (" + a.transport_error + ")";
  if (a.body.contains("error") && a.body["error"].is_object()) {
    const Json& e = a.body["error"];
    return "HTTP " + std::to_string(a.status) + " " + e.value("code", std::string()) + ": " +
           e.value("message", std::string());
  }
  return "HTTP " + std::to_string(a.status);
}
std::string error_code(const Answer& a) {
  if (a.body.contains("error") && a.body["error"].is_object()) return a.body["error"].value("code", std::string());
  return {};
}

Result<std::string> read_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::string();
  std::string token(kMaxTokenFileBytes + 1, '\0');
  in.read(token.data(), static_cast<std::streamsize>(token.size()));
  token.resize(static_cast<size_t>(in.gcount()));
  if (token.size() > kMaxTokenFileBytes)
    return limit_error("the token file " + path + " is over 256 bytes", "token_file");
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
  return token;
}

Status write_token_file(const std::string& path, const std::string& token) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Error{ErrorCode::kUsage, "cannot write the token file " + path, "token_file"};
    ::chmod(tmp.c_str(), S_IRUSR | S_IWUSR);  // 0600 before the secret goes in
    out << token << "\n";
    if (!out) return Error{ErrorCode::kUsage, "cannot write the token file " + path, "token_file"};
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Error{ErrorCode::kUsage, "cannot move the token file into " + path, "token_file"};
  }
  return Status::Ok();
}

void say(std::ostream& out, bool json, const std::string& event, const Json& detail) {
  if (json) {
    Json line = detail;
    line["event"] = event;
    out << line.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
  } else {
    out << "gpuplan agent: " << event;
    if (detail.contains("message")) out << ": " << detail["message"].get<std::string>();
    out << "\n";
  }
  out.flush();
}

// Sleeps `seconds`, waking early when `stop` is set. False when stopped.
bool nap(double seconds, const std::atomic<bool>& stop) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (stop.load()) return false;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        kStopPoll,
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(until - std::chrono::steady_clock::now())));
  }
  return !stop.load();
}

// The calibration texts to report: --bench-file's, then the bench's own run (--bench quick).
Result<std::vector<std::string>> bench_texts(const AgentOptions& o) {
  std::vector<std::string> texts;
  for (const auto& path : o.bench_files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return usage_error("cannot read --bench-file '" + path + "'; check the path", "bench_file");
    std::string text;
    char buf[65536];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
      text.append(buf, static_cast<size_t>(in.gcount()));
      if (text.size() > kMaxBenchFileBytes) {
        return limit_error("--bench-file '" + path + "' is over 4 MiB, the calibration file's limit", "bench_file");
      }
    }
    texts.push_back(std::move(text));
  }
  if (o.bench == "quick") {
    if (!o.bench_runner) {
      return usage_error(
          "this gpuplan has no bench built in: run `gpuplan bench --quick --out F` and give --bench-file F", "bench");
    }
    GPUPLAN_TRY(run, o.bench_runner());
    texts.insert(texts.end(), run.begin(), run.end());
  } else if (o.bench != "off") {
    return usage_error("--bench must be quick or off (got '" + o.bench + "')", "bench");
  }
  return texts;
}

// PUT /agent/bench of each calibration: {gpu_uuid, profile, calibration}, the GPU the file names. The
// answers (or why not), for --once's output and the log.
Json post_benches(const std::string& server, const std::string& token, const std::vector<std::string>& texts, bool json,
                  std::ostream& out, bool once, int64_t bench_request = 0) {
  Json answers = Json::array();
  for (const auto& text : texts) {
    const Json cal = Json::parse(text, nullptr, false);
    if (cal.is_discarded() || !cal.is_object() || !cal.contains("device") || !cal["device"].is_object() ||
        !cal["device"].contains("uuid") || !cal["device"]["uuid"].is_string()) {
      answers.push_back(Json{{"error", "not a calibration file with device.uuid (gpuplan bench --out)"}});
      continue;
    }
    const Json& d = cal["device"];
    Json body{{"gpu_uuid", d["uuid"]}, {"calibration", text}};
    if (d.contains("mig_profile") && d["mig_profile"].is_string()) body["profile"] = d["mig_profile"];
    if (bench_request > 0) body["bench_request"] = bench_request;
    Answer a = http_call(server, "PUT", "/agent/bench", token, body);
    if (a.status == 200) {
      answers.push_back(a.body);
      if (!once) say(out, json, "bench", Json{{"gpu_uuid", d["uuid"]}, {"message", "bench sent"}});
    } else {
      answers.push_back(Json{{"gpu_uuid", d["uuid"]}, {"error", error_text(a)}});
      if (!once) say(out, json, "bench", Json{{"gpu_uuid", d["uuid"]}, {"message", "bench refused: " + error_text(a)}});
    }
  }
  return answers;
}

// The heartbeat answer's pending bench request (0: none, or not a whole number the agent can trust).
int64_t bench_request_of(const Json& answer) {
  if (!answer.is_object() || !answer.contains("bench_request")) return 0;
  const Json& v = answer["bench_request"];
  return v.is_number_integer() ? std::max<int64_t>(v.get<int64_t>(), 0) : 0;
}

}  // namespace

std::vector<DesiredInstance> desired_instances(const Json& desired) {
  std::vector<DesiredInstance> out;
  if (!desired.is_array()) return out;
  for (const Json& d : desired) {
    if (!d.is_object() || !d.contains("rental_id") || !d["rental_id"].is_string()) continue;
    DesiredInstance x;
    x.rental_id = d["rental_id"].get<std::string>();
    if (d.contains("generation") && d["generation"].is_number_integer()) x.generation = d["generation"].get<int64_t>();
    if (d.contains("gpu_uuid") && d["gpu_uuid"].is_string()) x.ref.gpu_uuid = d["gpu_uuid"].get<std::string>();
    if (d.contains("profile") && d["profile"].is_string()) x.ref.profile = d["profile"].get<std::string>();
    if (d.contains("placement") && d["placement"].is_number_integer()) {
      x.ref.start = static_cast<int>(std::clamp<int64_t>(d["placement"].get<int64_t>(), -1, kMaxPlacementStart));
    }
    out.push_back(std::move(x));
  }
  return out;
}

int64_t next_seq(int64_t last) {
  const int64_t wall =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  return std::max(last + 1, wall);
}

Status run_agent(const AgentOptions& o, const std::atomic<bool>& stop, bool json, std::ostream& out) {
  GPUPLAN_TRY(backend, open_nvml(o.nvml, o.mig_writes));
  if (o.server.empty()) {
    if (!o.once) return usage_error("--server is required (only --once may print the inventory without one)", "server");
    GPUPLAN_TRY(inv, backend->read());
    const Json j = inventory_json(inv, backend->boot_id());
    out << j.dump(2) << "\n";  // JSON either way: the inventory is data
    return Status::Ok();
  }
  GPUPLAN_CHECK(http::parse_url(o.server, "server"));
  std::string token;
  if (!o.token_file.empty()) {
    GPUPLAN_TRY(t, read_token_file(o.token_file));
    token = t;
  }
  std::mt19937_64 rng(std::random_device{}());
  int backoff = kInitialBackoffSeconds;
  // A transient failure: wait (jittered, doubling up to the cap) and try again; false when stopped.
  auto back_off = [&](const std::string& what) {
    if (o.once) return false;
    std::uniform_real_distribution<double> jitter(0.5, 1.0);
    const double wait = backoff * jitter(rng);
    say(out, json, "backoff",
        Json{{"message", what + "; retrying in " + std::to_string(wait).substr(0, 4) + " s"}, {"seconds", wait}});
    backoff = std::min(backoff * 2, o.max_backoff_seconds);
    return nap(wait, stop);
  };

  GPUPLAN_TRY(benches, bench_texts(o));
  bool bench_sent = benches.empty();
  while (token.empty()) {
    if (o.enroll.empty()) {
      return usage_error("no agent token: give --enroll TOKEN (from `gpuplan nodes add`) or a --token-file", "enroll");
    }
    Answer a = http_call(o.server, "POST", "/agent/enroll", "",
                         Json{{"enrollment_token", o.enroll}, {"boot_id", backend->boot_id()}});
    if (a.status == 201 && a.body.contains("agent_token") && a.body["agent_token"].is_string()) {
      token = a.body["agent_token"].get<std::string>();
      if (!o.token_file.empty()) GPUPLAN_CHECK(write_token_file(o.token_file, token));
      say(out, json, "enrolled", Json{{"node_id", a.body.value("node_id", std::string())}, {"message", "enrolled"}});
      break;
    }
    if (a.status == 401 || a.status == 400 || a.status == 413) {
      return Error{ErrorCode::kUnauthenticated, "enrolment refused: " + error_text(a), "enroll"};
    }
    if (!back_off("enrolment: " + error_text(a)))
      return o.once ? Status(Error{ErrorCode::kUnavailable, "enrolment: " + error_text(a), "server"}) : Status::Ok();
  }

  int64_t seq = 0;
  int heartbeat_seconds = static_cast<int>(10);
  bool need_inventory = true;
  int since_inventory = 0;
  std::string boot;
  Json running = Json::array();    // what the last answer said should run, echoed as running
  Json failed = Json::array();     // dynamic MIG: rentals whose instance could not be made, for the next heartbeat
  NodeInventory last_inventory;    // what the last inventory PUT said (dynamic MIG compares against it)
  bool said_static = false;        // the "node policy is static" notice went out once
  Json once_out = Json::object();  // --once with a server: the inventory's and the heartbeat's answers
  int64_t bench_ran = 0;           // the last bench request (heartbeat's bench_request) this agent ran
  // A requested bench running in the background, and the request it answers.
  std::future<Result<std::vector<std::string>>> bench_job;
  int64_t bench_job_request = 0;
  auto finish_bench = [&](Result<std::vector<std::string>> texts, int64_t request) -> Json {
    if (!texts) {
      say(out, json, "bench_failed",
          Json{{"bench_request", request},
               {"message", "bench request " + std::to_string(request) + " failed: " + texts.error().message}});
      return Json{{"bench_request", request}, {"error", texts.error().message}};
    }
    return post_benches(o.server, token, *texts, json, out, o.once, request);
  };
  while (!stop.load()) {
    if (bench_job.valid() && bench_job.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      (void)finish_bench(bench_job.get(), bench_job_request);
    }
    if (need_inventory || since_inventory >= kInventoryEveryHeartbeats || backend->boot_id() != boot) {
      auto inv = backend->read();
      if (!inv) {
        if (!back_off("NVML: " + inv.error().message)) return o.once ? Status(inv.error()) : Status::Ok();
        continue;
      }
      boot = backend->boot_id();
      last_inventory = *inv;
      Json body = inventory_json(*inv, boot);
      seq = next_seq(seq);
      body["seq"] = seq;
      Answer a = http_call(o.server, "PUT", "/agent/inventory", token, body);
      if (a.status == 401 || a.status == 403) {
        return Error{ErrorCode::kUnauthenticated, "the server refused the agent token: " + error_text(a), "token"};
      }
      if (a.status != 200) {
        if (!back_off("inventory: " + error_text(a)))
          return o.once ? Status(Error{ErrorCode::kUnavailable, error_text(a), "server"}) : Status::Ok();
        continue;
      }
      if (o.once) once_out["inventory"] = a.body;
      if (!o.once)
        say(out, json, "inventory", Json{{"seq", seq}, {"gpus", body["gpus"].size()}, {"message", "inventory sent"}});
      need_inventory = false;
      since_inventory = 0;
      if (!bench_sent) {  // the GPUs are the server's now: their measured figures can follow
        const Json answers = post_benches(o.server, token, benches, json, out, o.once);
        if (o.once) once_out["bench"] = answers;
        bench_sent = true;
      }
    }
    seq = next_seq(seq);
    Json beat{{"seq", seq}, {"boot_id", boot}, {"running", running}};
    if (!failed.empty()) beat["failed"] = failed;
    Answer h = http_call(o.server, "POST", "/agent/heartbeat", token, beat);
    if (h.status == 401 || h.status == 403) {
      return Error{ErrorCode::kUnauthenticated, "the server refused the agent token: " + error_text(h), "token"};
    }
    if (h.status == 409 && error_code(h) == "inventory_required") {
      need_inventory = true;
      continue;
    }
    if (h.status == 200 || (h.status == 409 && error_code(h) == "stale" && h.body.contains("desired"))) {
      backoff = kInitialBackoffSeconds;
      running = Json::array();
      failed = Json::array();
      const Json desired = h.body.value("desired", Json::array());
      std::set<std::string> failed_ids;
      // Both sides consent to MIG writes: this agent (--mig-policy dynamic) and the node's policy on the server.
      const bool node_dynamic = h.body.contains("mig_policy") && h.body["mig_policy"].is_string() &&
                                h.body["mig_policy"].get<std::string>() == "dynamic";
      if (o.mig_writes == MigWrites::kDynamic && !node_dynamic && !said_static) {
        said_static = true;
        say(out, json, "mig_policy_static",
            Json{{"message",
                  "the node's MIG policy on the server is static: no GPU instance is created or destroyed "
                  "(gpuplan nodes add --mig-policy dynamic)"}});
      }
      if (o.mig_writes == MigWrites::kDynamic && node_dynamic) {
        // Make the node's instances what the server placed; a rental whose instance failed is reported
        // (not echoed as running) in the next heartbeat, and changed instances go out in a fresh inventory.
        const MigReconcile rec = reconcile_mig(*backend, last_inventory, desired_instances(desired));
        for (const MigFailure& f : rec.failures) {
          failed_ids.insert(f.rental_id);
          failed.push_back(
              Json{{"rental_id", f.rental_id}, {"generation", f.generation}, {"code", f.code}, {"message", f.message}});
          say(out, json, "mig_failed", Json{{"rental_id", f.rental_id}, {"code", f.code}, {"message", f.message}});
        }
        for (const std::string& e : rec.errors) say(out, json, "mig_error", Json{{"message", e}});
        if (rec.created > 0 || rec.destroyed > 0) {
          need_inventory = true;
          say(out, json, "mig_changed",
              Json{{"created", rec.created},
                   {"destroyed", rec.destroyed},
                   {"message",
                    std::to_string(rec.created) + " created, " + std::to_string(rec.destroyed) + " destroyed"}});
        }
      }
      for (const Json& d : desired) {
        if (d.is_object() && d.contains("rental_id") && d["rental_id"].is_string() &&
            !failed_ids.count(d["rental_id"].get<std::string>())) {
          running.push_back(Json{{"rental_id", d["rental_id"]}, {"generation", d.value("generation", 0)}});
        }
      }
      heartbeat_seconds = std::clamp(h.body.value("heartbeat_seconds", 10), kMinHeartbeatSeconds, kMaxHeartbeatSeconds);
      // A bench on request (POST /nodes/{id}/bench): once per request, never two at a time.
      const int64_t asked = bench_request_of(h.body);
      if (asked > bench_ran && !bench_job.valid()) {
        bench_ran = asked;
        if (!o.bench_runner) {
          say(out, json, "bench_failed",
              Json{{"bench_request", asked},
                   {"message", "bench request " + std::to_string(asked) + ": this gpuplan has no bench built in"}});
        } else if (o.once) {
          once_out["bench_request"] = finish_bench(o.bench_runner(), asked);
        } else {
          say(out, json, "bench_started",
              Json{{"bench_request", asked}, {"message", "bench request " + std::to_string(asked) + " started"}});
          bench_job = std::async(std::launch::async, o.bench_runner);
          bench_job_request = asked;
        }
      }
      if (o.once) {
        once_out["heartbeat"] = h.body;
        if (!failed.empty()) once_out["failed"] = failed;
        out << once_out.dump(2) << "\n";
        return Status::Ok();
      }
      ++since_inventory;
      if (!nap(heartbeat_seconds, stop)) break;
      continue;
    }
    if (!back_off("heartbeat: " + error_text(h)))
      return o.once ? Status(Error{ErrorCode::kUnavailable, error_text(h), "server"}) : Status::Ok();
  }
  say(out, json, "stopped", Json{{"message", "stopped"}});
  return Status::Ok();
}

}  // namespace gpuplan::agent

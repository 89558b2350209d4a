// `gpuplan agent` (issue #15): the thin CLI row of the node agent; the agent itself is src/agent/.
#include <atomic>
#include <csignal>
#include <iostream>

#include "agent/agent.h"
#include "cli/cli.h"
#include "gpuplan/bench.h"
#include "gpuplan/catalog.h"
#include "gpuplan/market.h"

namespace gpuplan::cli {

namespace {

struct AgentCommand {
  CLI::App* app = nullptr;
  agent::AgentOptions options;
};
AgentCommand& agent_command() {
  static AgentCommand command;
  return command;
}

std::atomic<bool> g_stop{false};
// The budget of each GPU's quick run: `gpuplan bench --quick`'s default (docs/bench.md, "Budget").
constexpr double kQuickBenchSeconds = 30;
extern "C" void on_stop_signal(int) { g_stop.store(true); }

// `gpuplan agent --bench quick` and benches on request (issue #16): `gpuplan bench --quick` on each of the
// node's GPUs in turn, the CUDA backend, device 0 up to the first index the backend does not have;
// src/agent cannot link the bench (scripts/layers.txt), so the CLI hands it this runner. Any failure on device 0 (no
// GPU, no CUDA plugin, a busy GPU) is the agent's error, as a bad --bench-file is.
Result<std::vector<std::string>> quick_bench_every_gpu() {
  bench::device_access().store(true);  // the agent's own node: its GPUs are the ones to measure
  auto catalog = Catalog::load({});
  if (!catalog) return catalog.error();
  std::vector<std::string> texts;
  for (int device = 0; device < market::kMaxGpusPerNode; ++device) {  // the most GPUs a node may have
    bench::BenchOptions o;
    o.backend = "cuda";
    o.device = device;
    o.quick = true;
    o.budget_seconds = kQuickBenchSeconds;
    o.stop = &g_stop;
    auto report = bench::run_bench(**catalog, o);
    if (!report) {
      if (device == 0) return report.error();
      break;  // past the last GPU
    }
    texts.push_back(bench::calibration_json(report->calibration).dump(2));
  }
  return texts;
}

}  // namespace

void add_agent_command(CLI::App& app) {
  AgentCommand& c = agent_command();
  c.app = app.add_subcommand("agent", "Run the node agent: report this node's GPUs (NVML) to a market server");
  c.app->add_option("--server", c.options.server, "The market's server, http://HOST:PORT");
  c.app->add_option("--enroll", c.options.enroll, "The one-time enrolment token `gpuplan nodes add` printed");
  c.app->add_option("--token-file", c.options.token_file,
                    "The agent token: read when present, written (0600) after enrolment");
  c.app->add_flag("--once", c.options.once,
                  "One inventory (and with --server one heartbeat), printed, then exit; without --server: "
                  "print the inventory only");
  c.app->add_option("--nvml", c.options.nvml, "nvml (libnvidia-ml.so.1), nvml:PATH, or fake:FILE (a JSON fixture)")
      ->default_str("nvml");
  c.app
      ->add_option_function<std::string>(
          "--mig-policy",
          [&c](const std::string& v) {
            c.options.mig_writes = v == "dynamic" ? agent::MigWrites::kDynamic : agent::MigWrites::kOff;
          },
          "read-only (default: NVML read calls only) or dynamic (the node's MIG policy is dynamic: create the "
          "GPU instances the server placed, destroy the ones no rental wants)")
      ->check(CLI::IsMember({"read-only", "static", "dynamic"}))
      ->default_str("read-only");
  c.app
      ->add_option("--bench", c.options.bench,
                   "quick: run gpuplan bench --quick at enrolment and report it (PUT /agent/bench); off: do not")
      ->default_str("off");
  c.app->add_option("--bench-file", c.options.bench_files,
                    "Calibration files (gpuplan bench --out F) to report after the first inventory; repeatable");
}

bool agent_requested() { return agent_command().app && agent_command().app->parsed(); }

int run_agent(const OutputFormat& fmt, const std::function<int(Error)>& report) {
  AgentCommand& c = agent_command();
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  // The runner serves --bench quick at enrolment and every bench the provider requests later
  // (POST /nodes/{id}/bench: the heartbeat answer's bench_request).
  if (!c.options.bench_runner) c.options.bench_runner = quick_bench_every_gpu;
  Status s = agent::run_agent(c.options, g_stop, fmt.json, std::cout);
  if (!s) return report(s.error());
  return 0;
}

}  // namespace gpuplan::cli

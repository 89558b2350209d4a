// The planner: for every offer, every instance count and parallel layout, the cheapest way to meet a
// goal (serve a request rate within latency targets, or train N tokens within a deadline and budget),
// with the reason each rejected offer fails. The planner owns the search and the ranking; what fits and
// how fast it runs come from a PlanModel, which the fit and performance models implement (and tests
// replace with models whose answers are known by construction).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/offers.h"
#include "gpuplan/target.h"

namespace gpuplan {

// Serving on one replica of tp x pp devices at a batch (concurrent sequences).
struct ServePoint {
  double ttft_seconds = 0;  // time to first token at this batch
  double tpot_seconds = 0;  // time per output token at this batch
};

// Training on dp x tp x pp devices.
struct TrainPoint {
  bool fits = false;
  std::string why_not;           // when it does not fit
  double tokens_per_second = 0;  // the whole group
  int64_t global_batch = 0;      // sequences (samples) per optimizer step over all replicas; 0 = unknown
};

// Starts a PlanModel's `why_not` for a refused configuration; the planner reports it as refused, with
// the reason after the prefix, rather than as not fitting.
inline constexpr std::string_view kRefusedPrefix = "refused: ";

class PlanModel {
 public:
  virtual ~PlanModel() = default;
  // The largest batch that fits one replica of tp x pp devices of `t` (0 when not even one sequence
  // fits), and when 0, why: a `why_not` (here or in TrainPoint) that starts with kRefusedPrefix is a
  // refusal (refusal.h: no engine runs the configuration), any other is a memory shortfall.
  virtual int max_serving_batch(const Target& t, int tp, int pp, std::string* why_not) const = 0;
  virtual ServePoint serve(const Target& t, int tp, int pp, int batch) const = 0;
  virtual TrainPoint train(const Target& t, int dp, int tp, int pp) const = 0;
  // Whether the model's shape allows tp-way tensor parallelism (heads divisible) and pp stages.
  virtual bool layout_allowed(int tp, int pp) const = 0;
  // The planner evaluates one offer at a time and says which before its configurations: a model may
  // predict each offer with what that offer's GPUs measured (Offer::measured_efficiency), and its
  // network between instances (Offer::gpus per node, Offer::fabric).
  virtual void begin_offer(const Offer& offer) const { (void)offer; }
  // Bytes of the weights an instance loads before it runs (the model load of its start-up); 0 = none.
  virtual double weights_bytes() const { return 0; }
};

enum class PlanObjective { kCost, kTime };

struct ServeGoal {
  double rate_requests_per_second = 0;
  int input_tokens = 0;
  int output_tokens = 0;
  std::optional<double> ttft_slo_seconds;
  std::optional<double> tpot_slo_seconds;
};

struct TrainGoal {
  double train_tokens = 0;
  std::optional<double> deadline_seconds;
  std::optional<double> budget;  // in the offers' currency
};

struct PlanOptions {
  bool spot = false;
  PlanObjective objective = PlanObjective::kCost;
  // Per offer. The request's default is data/options.yaml `max_instances` (16: plan.h said 64 and the
  // plan command 16 until issue #12); tests/unit/options_test.cc fails when the two disagree.
  int max_instances = 16;
  // Per plan, all instances together: data/options.yaml `max_gpus` (64; tests/unit/options_test.cc).
  int max_gpus = 64;
};

// Model load at start-up: the weights read at 125 MiB/s, the baseline throughput of an AWS EBS gp3
// volume (docs.aws.amazon.com, CreateVolume: gp3 throughput 125-1000 MiB/s, 125 unless provisioned),
// the slowest common place a fresh instance reads a checkpoint from (a download from the Hugging Face
// hub is often faster, a cold network volume not).
inline constexpr double kModelLoadBytesPerSecond = 125.0 * 1024 * 1024;

struct Plan {
  const Offer* offer = nullptr;
  int instances = 0;
  int gpus = 0;  // instances x offer GPUs
  int tp = 1;
  int pp = 1;
  int replicas = 1;  // serving: model copies; training: data-parallel degree
  int batch = 0;     // serving: concurrent sequences per replica; training: sequences per optimizer step
  double cost_per_hour = 0;
  double cost_total = 0;                    // training: to finish; serving: per hour of service
  double cost_per_million_tokens = 0;       // serving: per million tokens (input + output) at the goal rate
  double seconds_total = 0;                 // training: time to finish; serving: 0
  double capacity_requests_per_second = 0;  // serving
  double ttft_seconds = 0;
  double tpot_seconds = 0;
  double tokens_per_second = 0;
  // Start-up (issue #18): provisioning (the offer's startup_seconds) plus loading the weights at
  // kModelLoadBytesPerSecond. Training: seconds_total = startup + run, and each instance is billed
  // billed_seconds (startup + run rounded up to the offer's billing step, at least its minimum).
  double provisioning_seconds = 0;
  double load_seconds = 0;
  double startup_seconds = 0;
  double run_seconds = 0;     // training: the job's compute time
  double billed_seconds = 0;  // training: per instance; serving: 0 (a service runs until stopped)
  bool meets_goal = false;
  std::string reason;  // why this plan was chosen for the offer, or why the offer fails
};

struct PlanResult {
  std::vector<Plan> plans;       // best first: feasible plans by objective, then the rest
  std::vector<Plan> pareto;      // training: cost against time, no plan both cheaper and faster
  std::vector<Plan> rejected;    // one per offer that cannot meet the goal, with the reason
  long long configurations = 0;  // configurations evaluated
};

// `offers` are already filtered (provider, region, staleness). Each offer yields at most one plan:
// its best configuration.
PlanResult plan_serving(const PlanModel& model, const std::vector<const Offer*>& offers, const ServeGoal& goal,
                        const PlanOptions& options);
PlanResult plan_training(const PlanModel& model, const std::vector<const Offer*>& offers, const TrainGoal& goal,
                         const PlanOptions& options);

}  // namespace gpuplan

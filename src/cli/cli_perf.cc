// `gpuplan perf`: the workload options of `gpuplan fit` plus lengths, a request rate and tokens to train.
#include <cstdio>
#include <sstream>

#include "cli/cli.h"

namespace gpuplan::cli {

namespace {

std::string num(const Json& v, const char* fmt) {
  if (!v.is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v.get<double>());
  return buf;
}

std::string ms(const Json& v) { return v.is_number() ? num(Json(v.get<double>() * 1e3), "%.4g") : "-"; }

// "12.3 (10.1-14.2)": a figure with its band.
std::string banded(const Json& t, const char* key, const char* fmt, double scale = 1) {
  if (!t.contains(key) || !t[key].is_number()) return "-";
  auto f = [&](const Json& v) { return v.is_number() ? num(Json(v.get<double>() * scale), fmt) : std::string("?"); };
  std::string s = f(t[key]);
  if (t.contains("low") && t["low"].contains(key)) s += " (" + f(t["low"][key]) + "-" + f(t["high"][key]) + ")";
  return s;
}

std::string render_perf(const Json& r, const Json&, const OutputFormat& fmt) {
  const Json& w = r["workload"];
  const std::string task = w["task"].get<std::string>();
  const bool infer = task == "infer";
  // CNN and encoder inference: one forward pass of the batch (step time and samples/s).
  const bool cnn = r["targets"].empty() ? false : r["targets"][0].contains("samples_per_second") && infer;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> right;
  if (infer && !cnn) {
    header = {"target",       "count",         "fits",        "bound",           "ttft_ms",        "tpot_ms",
              "decode_tok/s", "prefill_tok/s", "batch_tok/s", "serve_max_batch", "serve_max_tok/s"};
    right = {false, true, false, false, true, true, true, true, true, true, true};
    for (const auto& t : r["targets"]) {
      const Json& s = t["serving"];
      rows.push_back({t["target"].get<std::string>(), std::to_string(t["count"].get<int>()),
                      t["fits"].get<bool>() ? "yes" : "no", t["bound"].get<std::string>(),
                      banded(t, "ttft_seconds", "%.4g", 1e3), banded(t, "tpot_seconds", "%.4g", 1e3),
                      banded(t, "decode_tokens_per_second", "%.4g"), num(t["prefill_tokens_per_second"], "%.4g"),
                      num(t["tokens_per_second"], "%.4g"),
                      s.is_object() ? std::to_string(s["max_batch"].get<long long>()) : "-",
                      s.is_object() ? num(s["max_tokens_per_second"], "%.4g") : "-"});
    }
  } else if (cnn) {
    header = {"target", "count", "fits", "bound", "step_ms", "samples/s"};
    right = {false, true, false, false, true, true};
    for (const auto& t : r["targets"]) {
      rows.push_back({t["target"].get<std::string>(), std::to_string(t["count"].get<int>()),
                      t["fits"].get<bool>() ? "yes" : "no", t["bound"].get<std::string>(),
                      banded(t, "step_seconds", "%.4g", 1e3), banded(t, "samples_per_second", "%.4g")});
    }
  } else {
    header = {"target", "count", "fits", "bound", "step_s", "tokens/s", "samples/s", "mfu_%", "train_hours"};
    right = {false, true, false, false, true, true, true, true, true};
    for (const auto& t : r["targets"]) {
      rows.push_back({t["target"].get<std::string>(), std::to_string(t["count"].get<int>()),
                      t["fits"].get<bool>() ? "yes" : "no", t["bound"].get<std::string>(),
                      banded(t, "step_seconds", "%.4g"), banded(t, "tokens_per_second", "%.4g"),
                      num(t["samples_per_second"], "%.4g"), num(Json(t["mfu"].get<double>() * 100), "%.1f"),
                      t.contains("train_seconds") ? banded(t, "train_seconds", "%.4g", 1.0 / 3600) : "-"});
    }
  }
  if (fmt.csv) return render_csv(header, rows);
  std::ostringstream os;
  const Json& m = r["model"];
  os << m["id"].get<std::string>() << ": " << fmt_value(m["parameters"]) << " parameters";
  if (m["active_parameters"] != m["parameters"]) os << ", " << fmt_value(m["active_parameters"]) << " active per token";
  os << "\n"
     << task << ", weights " << w["weights"].get<std::string>() << ", KV " << w["kv_cache"].get<std::string>()
     << ", batch " << w["batch"];
  if (infer && !cnn) os << ", input " << w["input_tokens"] << " + output " << w["output_tokens"] << " tokens";
  if (!infer) os << ", sequence " << w["context"];
  os << ", tp " << w["tp"] << ", pp " << w["pp"] << ", engine " << w["engine"].get<std::string>() << "\n\n";
  os << render_table(header, rows, right);
  if (infer && !cnn) {
    os << "\nttft = prefill of the whole batch; tpot = one decode step; decode_tok/s per sequence; batch_tok/s = "
          "generated "
          "tokens of the batch / (prefill + decode).\nserve_* = continuous batching at the largest batch memory "
          "allows.";
    bool any_rate = false;
    for (const auto& t : r["targets"])
      any_rate = any_rate || (t["serving"].is_object() && t["serving"].contains("rate_requests_per_second"));
    if (any_rate) {
      os << "\n\nAt " << num(w["rate"], "%.4g") << " requests/s:\n";
      std::vector<std::vector<std::string>> rr;
      for (const auto& t : r["targets"]) {
        const Json& s = t["serving"];
        if (!s.is_object() || !s.contains("saturated")) continue;
        rr.push_back({t["target"].get<std::string>(), s["saturated"].get<bool>() ? "SATURATED" : "ok",
                      num(s["mean_batch"], "%.3g"), ms(s["ttft_seconds"]), ms(s["tpot_seconds"]),
                      num(s["latency_seconds"], "%.4g"), num(s["tokens_per_second"], "%.4g"),
                      num(s["max_requests_per_second"], "%.4g")});
      }
      os << render_table({"target", "load", "mean_batch", "ttft_ms", "tpot_ms", "latency_s", "tok/s", "max_req/s"}, rr,
                         {false, false, true, true, true, true, true, true});
    }
  }
  os << "\nIn parentheses: where measurements fell relative to the model's predictions (10th-90th percentile over the\n"
        "published rows of that kind, gpuplan validate --kind perf); a band that excludes the figure is a known "
        "bias.\n";
  return os.str();
}

}  // namespace

void add_perf_commands(CLI::App& app, std::vector<std::unique_ptr<CliCommand>>& commands) {
  auto c = std::make_unique<CliCommand>();
  c->command = "perf";
  c->app = app.add_subcommand(
      "perf", "How fast? Time to first token, per output token, throughput, serving, training step and MFU");
  c->value("model", "Zoo id (gpuplan perf --model llama-2-7b) or path of a Hugging Face config.json")
      .option->required();
  c->value("task", "infer | train | lora | qlora (default infer)");
  c->value("weights",
           "Weight format: fp32 bf16 fp16 fp8 int8 llm-int8 int4-gptq int4-awq nf4 nf4-dq fp4 fp4-dq q8_0 q6_k q5_k_m "
           "q4_k_m q4_0");
  c->value("kv-cache", "KV-cache format: fp32 bf16 fp16 fp8 int8 (default: the compute dtype)");
  c->value("batch", "Sequences decoded together (inference) or micro-batch per GPU (training); default 1");
  c->value("context", "Tokens per sequence: prompt + generated (inference), sequence length (training)");
  c->value("input-tokens", "Prompt tokens (default 512, or context - output)");
  c->value("output-tokens", "Generated tokens (default 128)");
  c->value("rate", "Requests per second to serve: the batch and latency that rate costs");
  c->value("train-tokens", "Tokens (samples for CNNs) to train on: the time it takes");
  c->list("gpu",
          "Target: GPU id, alias or GPU/MIG profile, with xN for N devices (h100-80gb-sxm5x8); repeatable. Default: "
          "every catalog target");
  c->value("count", "Devices per target when --gpu has no xN (default tp x pp)");
  c->value("tp", "Tensor-parallel degree");
  c->value("pp", "Pipeline-parallel degree");
  c->value("dp", "Data-parallel degree (default count / (tp x pp))");
  c->value("global-batch", "Sequences per optimizer step over all data-parallel ranks (default micro-batch x dp)");
  c->value("optimizer", "adamw | adamw-8bit | sgd (training)");
  c->value("zero", "ZeRO stage / FSDP: 0 none, 1 optimizer, 2 + gradients, 3 + weights");
  c->value("checkpointing", "none | selective | full activation checkpointing (recomputation)");
  c->value("lora-rank", "LoRA rank (default 16)");
  c->value("lora-targets", "LoRA target modules: q,k,v,o,gate,up,down or all (default q,v)");
  c->value("engine", "transformers | pytorch | vllm | tgi | deepspeed | llama.cpp | megatron | tensorrt-llm | exllama");
  c->value("flash-attention", "true | false: SDPA/flash kernels (default true)");
  c->value("cuda-graphs", "true | false: decode steps replayed as CUDA graphs (default: all engines but transformers)");
  c->value("gpu-memory-utilization", "vLLM's share of the GPU (default 0.9)");
  c->value("max-num-batched-tokens", "vLLM prefill chunk in tokens (default 8192)");
  c->value("group-size", "GPTQ/AWQ group size (default 128)");
  c->value("master-weights", "true | false: fp32 master weights under 16-bit training (default true)");
  c->value("efficiency",
           "Override efficiency assumptions, key=value,...: gemm, gemm_fp8, gemm_half_intensity, dequant, "
           "attention, bandwidth, link, kernel_us, step_ms, overlap (see docs/model.md)");
  c->render = render_perf;
  c->prepare = read_model_file;
  commands.push_back(std::move(c));
}

}  // namespace gpuplan::cli

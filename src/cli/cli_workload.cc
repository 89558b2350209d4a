// The workload options, one list for every command that takes a workload (fit, perf, plan).
#include "cli/cli.h"

namespace gpuplan::cli {

void add_workload_options(CliCommand& c, WorkloadOptions which) {
  const bool perf = which.perf;
  CLI::Option* model = c.value("model", "Zoo id (llama-2-7b) or path of a Hugging Face config.json").option;
  if (which.model_required) model->required();
  c.value("task", "infer | train | lora | qlora (default infer)");
  c.value("weights",
          "Weight format: fp32 bf16 fp16 fp8 int8 llm-int8 int4-gptq int4-awq nf4 nf4-dq fp4 fp4-dq q8_0 q6_k q5_k_m "
          "q4_k_m q4_0");
  c.value("kv-cache", "KV-cache format: fp32 bf16 fp16 fp8 int8 (default: the compute dtype)");
  c.value("batch", "Sequences (inference) or micro-batch per GPU (training); default 1");
  c.value("context", "Tokens per sequence: prompt + generated (inference), sequence length (training)");
  c.value("input-tokens",
          perf ? "Prompt tokens (default 512, or context - output)" : "Prompt tokens (the prefill step)");
  c.value("output-tokens", perf ? "Generated tokens (default 128)" : "Generated tokens");
  if (perf) {
    c.value("rate", "Requests per second to serve");
    c.value("train-tokens", "Tokens (samples for CNNs) to train on");
  }
  if (which.gpu) {
    c.list("gpu",
           "Target: GPU id, alias or GPU/MIG profile, with xN for N devices (a100-80gb-sxm4x4); repeatable. Default: "
           "every catalog target");
  }
  c.value("count", "Devices per target when --gpu has no xN (default tp x pp)");
  c.value("tp", "Tensor-parallel degree");
  c.value("pp", "Pipeline-parallel degree");
  if (perf) {
    c.value("dp", "Data-parallel degree (default count / (tp x pp))");
    c.value("global-batch", "Sequences per optimizer step over all data-parallel ranks");
  }
  c.value("optimizer", "adamw | adamw-8bit | sgd (training)");
  c.value("zero", "ZeRO stage / FSDP: 0 none, 1 optimizer, 2 + gradients, 3 + weights");
  c.value("checkpointing", "none | selective | full activation checkpointing");
  c.value("lora-rank", "LoRA rank (default 16)");
  c.value("lora-dropout", "LoRA dropout probability (default 0, PEFT's; > 0 keeps a dropped input copy per target)");
  c.value("lora-targets", "LoRA target modules: q,k,v,o,gate,up,down or all (default q,v)");
  c.value("engine",
          perf ? "transformers | pytorch | vllm | tgi | deepspeed | llama.cpp | megatron | tensorrt-llm | exllama"
               : "transformers | pytorch | vllm | tgi | deepspeed | llama.cpp | megatron | tensorrt-llm");
  c.value("flash-attention", "true | false: SDPA/flash kernels (default true)");
  if (perf) c.value("cuda-graphs", "true | false: decode steps replayed as CUDA graphs");
  c.value("gpu-memory-utilization", "vLLM's share of the GPU (default 0.9)");
  c.value("max-num-batched-tokens",
          "vLLM prefill chunk in tokens (default 8192); for TGI its --max-batch-prefill-tokens (default 4096)");
  c.value("group-size", "GPTQ/AWQ group size (default 128)");
  c.value("master-weights", "true | false: fp32 master weights under 16-bit training (default true)");
  c.value("amp", "none | bf16 | fp16: autocast mixed precision over fp32 weights (HF Trainer bf16=True/fp16=True)");
  if (perf) {
    c.value("efficiency",
            "Override efficiency assumptions, key=value,...: gemm, gemm_fp8, gemm_half_intensity, dequant, attention, "
            "bandwidth, link, kernel_us, step_ms, overlap (see docs/model.md)");
  }
}

}  // namespace gpuplan::cli

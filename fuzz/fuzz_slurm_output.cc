// Fuzzes the Slurm target's readers of command output (src/handoff/slurm.cc): the input is split at
// its first two NUL bytes into what squeue, sbatch and scancel answer (stdout), and the target's apply,
// status and stop run over a fake runner that answers them. Oracles (an abort is a libFuzzer crash):
// - nothing throws or crashes, whatever the tools print;
// - an accepted apply's job id is all digits (what sbatch --parsable prints before any ';'), or the id
//   squeue listed for the job's name;
// - stop and status of any answer are a value or an error, never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gpuplan/handoff.h"

namespace {
namespace h = gpuplan::handoff;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t a = in.find('\0');
  const size_t b = a == std::string::npos ? std::string::npos : in.find('\0', a + 1);
  const std::string squeue = in.substr(0, a);
  const std::string sbatch = a == std::string::npos ? "" : in.substr(a + 1, b == std::string::npos ? b : b - a - 1);
  const std::string scancel = b == std::string::npos ? "" : in.substr(b + 1);
  h::SlurmOptions o;
  o.run = [&](const std::vector<std::string>& argv, const std::string&) -> gpuplan::Result<h::ProcessResult> {
    const int code = (size % 3 == 0) ? 1 : 0;
    if (argv[0] == "squeue") return h::ProcessResult{code, squeue, squeue, false};
    if (argv[0] == "sbatch") return h::ProcessResult{code, sbatch, sbatch, false};
    return h::ProcessResult{code, scancel, scancel, false};
  };
  (void)h::accounting_enabled(in);    // scontrol show config
  (void)h::has_container_plugin(in);  // srun --help
  auto t = h::make_slurm_target(o);
  h::HandoffRental r;
  r.rental_id = "r_fuzz";
  r.generation = 1;
  r.slurm_gres_type = "3g.40gb";
  auto applied = t->apply(r);
  if (applied && !applied->already_existed) {
    if (applied->external_id.empty() || applied->external_id.find_first_not_of("0123456789") != std::string::npos) {
      std::abort();
    }
  }
  (void)t->status(r, "");
  (void)t->status(r, "42");
  (void)t->stop(r, "");
  (void)t->stop(r, "42");
  (void)t->access(r, applied ? applied->external_id : "");
  return 0;
}

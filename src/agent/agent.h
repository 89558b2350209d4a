// `gpuplan agent`: the node agent (issue #15, part 1). Always the agent calls the server, never the
// reverse (no port is opened on the node): it enrols once with the one-time enrolment token `gpuplan nodes
// add` printed, PUTs a full inventory read from NVML, then heartbeats every `heartbeat_seconds` the server
// gives (10), reporting what runs and receiving what should run. Errors back off (1 s doubling to 60 s,
// jittered); SIGTERM or SIGINT ends the loop cleanly. An HTTP client of the market: nothing of src/market or
// src/server is linked in (scripts/layers.txt).
#pragma once

#include <atomic>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "agent/nvml.h"
#include "gpuplan/status.h"

namespace gpuplan::agent {

struct AgentOptions {
  std::string server;      // http://host:port (empty with `once`: print the inventory only)
  std::string enroll;      // the one-time enrolment token (gpe_...)
  std::string token_file;  // the agent token: read if present, written (0600) after enrolment
  bool once = false;       // one inventory (and with a server one heartbeat), then exit
  std::string nvml;        // nvml, nvml:PATH, fake:FILE (nvml.h)
  // The node's MIG policy as the agent applies it: kOff (read calls only) unless the provider set the
  // node's policy to dynamic (--mig-policy dynamic): then the agent creates the GPU instances the
  // heartbeat's desired rentals name and destroys the ones no rental wants (nvml.h, reconcile_mig), and
  // reports a rental whose instance it could not create in the next heartbeat's `failed`.
  MigWrites mig_writes = MigWrites::kOff;
  int max_backoff_seconds = 60;
  // Measured figures (issue #16): after the first inventory the agent PUTs /agent/bench for each
  // calibration file (`gpuplan bench --out F`), the GPU its device.uuid names. `bench` "quick" runs the
  // bench first through `bench_runner` (set by a build that links the bench; src/agent does not).
  std::string bench = "off";             // quick | off
  std::vector<std::string> bench_files;  // --bench-file: calibration files already written
  // Runs `gpuplan bench --quick` on every GPU of the node; the calibration files' texts. Besides --bench
  // quick at enrolment, the agent runs it on request: when a heartbeat answer's `bench_request` N is newer
  // than the last it ran, in the background (heartbeats go on: a quick bench of 8 GPUs is 4 minutes, past
  // the 30 s that lose a node), then PUTs each file with `bench_request: N`.
  std::function<Result<std::vector<std::string>>()> bench_runner;
};

// A calibration file is at most this large (gpuplan/calibration.h kCalibrationMaxBytes, 4 MiB).
inline constexpr size_t kMaxBenchFileBytes = size_t{4} << 20;

inline constexpr int kInitialBackoffSeconds = 1;
inline constexpr int kInventoryEveryHeartbeats = 6;  // a fresh inventory each minute at the default 10 s

// Runs the agent until `stop` is set (the CLI sets it from SIGTERM/SIGINT) or, with `once`, after one
// round. Writes the inventory (once) or one line per event to `out`, as JSON lines when `json`.
// Returns what failed for good (a refused enrolment, an unreadable token file); transient errors retry.
Status run_agent(const AgentOptions& options, const std::atomic<bool>& stop, bool json, std::ostream& out);

// The heartbeat's desired rentals as dynamic MIG reads them (entries that are not objects, or lack a
// rental_id, are skipped).
std::vector<DesiredInstance> desired_instances(const Json& desired);

// The next report's sequence number: at least `last` + 1 and at least the wall clock in ms, so a restarted
// agent always reports newer than the process before it (which the server then fences).
int64_t next_seq(int64_t last);

}  // namespace gpuplan::agent

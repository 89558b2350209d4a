// The hand-off commands (cli_handoff.cc): `k8s render` (a rental's Kubernetes manifests; --apply with
// kubectl) and `nodes import-slurm` (a Slurm cluster's GPUs as an agent's inventory). A CLI-own row after
// the market's (it adds to their `nodes`); local commands that run with the catalog, never a server.
#pragma once

#include <functional>

#include "cli/cli.h"

namespace gpuplan::cli {

void add_handoff_commands(CLI::App& app);
bool handoff_requested();
int run_handoff(const Catalog& catalog, const OutputFormat& fmt, const std::function<int(Error)>& report);

}  // namespace gpuplan::cli

// The registry behind run_command. Each command family registers its functions here.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "gpuplan/api.h"

namespace gpuplan::api {

using CommandFn = std::function<Result<Json>(const Context&, const Json&)>;
// A row of the one command table: its name, what it does in one line (the CLI's help for it,
// command_description), the function, and whether it is a light read (command_is_light: a lookup in
// the loaded catalog or MIG tables, well under a millisecond, so the server gives it its own lane).
// The CLI and the router find every command here.
struct Command {
  std::string name;
  std::string description;
  CommandFn fn;
  bool light = false;
};
using CommandTable = std::vector<Command>;

void register_catalog_commands(CommandTable& table);
void register_mig_commands(CommandTable& table);
void register_offer_commands(CommandTable& table);
void register_plan_commands(CommandTable& table);
void register_fit_commands(CommandTable& table);
void register_validate_commands(CommandTable& table);
void register_perf_commands(CommandTable& table);
void register_model_commands(CommandTable& table);
void register_vocabulary_commands(CommandTable& table);

}  // namespace gpuplan::api

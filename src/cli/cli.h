// The CLI is a thin main: it turns arguments into a request (keys = long options without dashes),
// calls gpuplan::run_command, and prints the result as text, JSON or CSV.
#pragma once

#include <CLI/CLI.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gpuplan/api.h"

namespace gpuplan::cli {

enum class OptKind { kValue, kList, kFlag, kFiles };

struct Opt {
  std::string key;  // request key: the long option without dashes, '-' -> '_'
  OptKind kind;
  CLI::Option* option = nullptr;
  std::string value;
  std::vector<std::string> values;
  bool flag = false;
};

struct OutputFormat {
  bool json = false;
  bool csv = false;
};

using Renderer = std::function<std::string(const Json& result, const Json& request, const OutputFormat& fmt)>;

struct CliCommand {
  std::string command;  // run_command name
  CLI::App* app = nullptr;
  std::deque<Opt> opts;  // deque: CLI11 keeps pointers to the storage
  Renderer render;
  std::vector<std::string> positional_keys;
  // Optional: turns the request built from the options into the one sent (e.g. reads a file named by
  // an option; the library never reads files for a request).
  std::function<Result<Json>(Json)> prepare;
  // Optional: the exit status of a successful result (e.g. 5 for an invalid MIG layout).
  std::function<int(const Json& result)> status;

  // Adds --name (value), a positional when `positional`, or both.
  Opt& value(const std::string& name, const std::string& help, bool positional = false);
  Opt& list(const std::string& name, const std::string& help, bool positional = false);
  Opt& flag(const std::string& name, const std::string& help);
  // Paths whose contents go into the request as [{name, text}] (the library never reads files).
  Opt& files(const std::string& name, const std::string& help);
  // The request made from the options that were given; fails when a file cannot be read.
  Result<Json> request() const;
};

// Each command family adds its subcommands.
void add_catalog_commands(CLI::App& app, std::vector<std::unique_ptr<CliCommand>>& commands);
void add_mig_commands(CLI::App& app, std::vector<std::unique_ptr<CliCommand>>& commands);
void add_offer_commands(CLI::App& app, std::vector<std::unique_ptr<CliCommand>>& commands);
void add_fit_commands(CLI::App& app, std::vector<std::unique_ptr<CliCommand>>& commands);
void add_perf_commands(CLI::App& app, std::vector<std::unique_ptr<CliCommand>>& commands);
void add_plan_commands(CLI::App& app, std::vector<std::unique_ptr<CliCommand>>& commands);
void add_model_commands(CLI::App& app, std::vector<std::unique_ptr<CliCommand>>& commands);
// Every option data/options.yaml declares for c.command, in declaration order: typed
// (`--batch INT:[1..1048576]=1`), with its allowed words, default, help, and required/positional as
// declared. The one way a command gets its options (cli_options.cc).
void add_declared_options(CliCommand& c);

// --model takes a zoo id or the path of a config.json: the CLI reads the file and sends it inline.
Result<Json> read_model_file(Json request);

// `gpuplan serve` (cli_serve.cc): added like the others, run instead of a command when given.
void add_serve_command(CLI::App& app);
bool serve_requested();
int run_serve(const Context& ctx);

// The market's commands (cli_market.cc): nodes, offers create|delete (and offers list --server), rent,
// rentals, usage, tenants, tokens (HTTP calls to --server), and admin init (the store itself). Added
// after add_offer_commands (they extend `offers`).
void add_market_commands(CLI::App& app);
bool market_requested();
// Runs the parsed market command; errors go through `report` (the CLI's error printer).
int run_market(const OutputFormat& fmt, const std::function<int(Error)>& report);

// Text helpers shared by renderers.
std::string render_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                         const std::vector<bool>& right_align = {});
std::string render_csv(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);
std::string fmt_value(const Json& v, int precision = 4);
// "  a, b: reason" lines, one per distinct reason of `targets` (fit or perf rows), targets in order; only
// refused rows when `refused_only` (a context refusal is the same for every target: said once).
std::string reason_lines(const Json& targets, bool refused_only);

}  // namespace gpuplan::cli

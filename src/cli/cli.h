// The CLI is a thin main: it turns arguments into a request (keys = long options without dashes),
// calls gpuplan::run_command, and prints the result as text, JSON or CSV.
#pragma once

#include <CLI/CLI.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
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

using RenderFn = std::string (*)(const Json& result, const Json& request, const OutputFormat& fmt);
using PrepareFn = Result<Json> (*)(Json request);
using StatusFn = int (*)(const Json& result);
using AddFn = void (*)(CLI::App& app);

// A row of the CLI's one command table (cli_commands.cc), in the order `gpuplan --help` lists them. A
// row of a library command takes its description from the library's command table
// (command_description) and its options, positional arguments included, from data/options.yaml
// (add_declared_options); the row adds only what the CLI alone knows: where the command sits and how
// its result prints.
struct CommandRow {
  std::string_view path;     // the CLI's words: "mig pack" (the first word of two is a group, kGroups)
  std::string_view command;  // the library command ("mig.pack"); empty for a CLI-own row (add)
  RenderFn render = nullptr;
  // Optional: turns the request built from the options into the one sent (e.g. reads a file named by
  // an option; the library never reads files for a request).
  PrepareFn prepare = nullptr;
  // Optional: the exit status of a successful result (e.g. 5 for an invalid MIG layout).
  StatusFn status = nullptr;
  // A CLI-own command that adds itself with its own options (serve; the market's HTTP client).
  AddFn add = nullptr;
};
std::span<const CommandRow> command_rows();

struct CliCommand {
  const CommandRow* row = nullptr;  // command, render, prepare and status
  CLI::App* app = nullptr;
  std::deque<Opt> opts;  // deque: CLI11 keeps pointers to the storage

  // Adds --name (value), a positional when `positional`, or both.
  Opt& value(const std::string& name, const std::string& help, bool positional = false);
  Opt& list(const std::string& name, const std::string& help, bool positional = false);
  Opt& flag(const std::string& name, const std::string& help);
  // Paths whose contents go into the request as [{name, text}] (the library never reads files).
  Opt& files(const std::string& name, const std::string& help);
  // The request made from the options that were given; fails when a file cannot be read.
  Result<Json> request() const;
};

// Every row of command_rows(), in order: the groups, each library command's subcommand with its
// declared options, and the CLI-own commands. `commands` gets one entry per library command.
// `argv_words`: the command line's words (argv[1..]). When they name a command (a row's first word, or a
// word of a CLI-own row's path), only the rows of the commands named are declared, with their options
// (CLI11's add_subcommand and add_option are most of a process's start-up work, issue #19); when they
// name none (`gpuplan`, `--help`, a mistyped command) every row gets its subcommand, so that the help
// and CLI11's error list them, but not its options; `--version` alone declares no command. Empty: every
// row with its options (tests and help generators).
void add_commands(CLI::App& app, std::vector<std::unique_ptr<CliCommand>>& commands,
                  std::span<const std::string_view> argv_words = {});
// Every option data/options.yaml declares for c.command, in declaration order: typed
// (`--batch INT:[1..1048576]=1`), with its allowed words, default, help, and required/positional as
// declared. The one way a command gets its options (cli_options.cc).
void add_declared_options(CliCommand& c);

// --model takes a zoo id or the path of a config.json: the CLI reads the file and sends it inline.
Result<Json> read_model_file(Json request);

// Text renderers of the library commands, one per row (cli_<family>.cc).
std::string render_catalog_list(const Json& result, const Json& request, const OutputFormat& fmt);
std::string render_catalog_show(const Json& result, const Json& request, const OutputFormat& fmt);
std::string render_compare(const Json& result, const Json& request, const OutputFormat& fmt);
std::string render_mig_profiles(const Json& result, const Json& request, const OutputFormat& fmt);
std::string render_mig_check(const Json& result, const Json& request, const OutputFormat& fmt);
std::string render_mig_layouts(const Json& result, const Json& request, const OutputFormat& fmt);
std::string render_mig_pack(const Json& result, const Json& request, const OutputFormat& fmt);
std::string render_offers_list(const Json& result, const Json& request, const OutputFormat& fmt);
std::string render_fit(const Json& result, const Json& request, const OutputFormat& fmt);
std::string render_validate(const Json& result, const Json& request, const OutputFormat& fmt);
std::string render_perf(const Json& result, const Json& request, const OutputFormat& fmt);
std::string render_plan(const Json& result, const Json& request, const OutputFormat& fmt);
std::string render_models_list(const Json& result, const Json& request, const OutputFormat& fmt);
std::string render_vocabulary(const Json& result, const Json& request, const OutputFormat& fmt);
// mig check: exit 5 (invalid layout) when the layout is invalid.
int mig_check_status(const Json& result);

// `gpuplan serve` (cli_serve.cc): a CLI-own row, run instead of a command when given.
void add_serve_command(CLI::App& app);
// `gpuplan offers import FILE --format skypilot|csv`: a downloaded price list as gpuplan's offers CSV
// (import_offers in gpuplan/offers.h), on stdout or --out, what was skipped on stderr.
void add_offers_import_command(CLI::App& app);
bool offers_import_requested();
int run_offers_import(const Context& ctx, const std::function<int(Error)>& report);
bool serve_requested();
int run_serve(const Context& ctx);

// `gpuplan agent` (cli_agent.cc): the node agent (src/agent/), a CLI-own row run instead of a command.
void add_agent_command(CLI::App& app);
bool agent_requested();
int run_agent(const OutputFormat& fmt, const std::function<int(Error)>& report);

// The market's commands (cli_market.cc): nodes, offers create|delete (and offers list --server), rent,
// rentals, usage, tenants, tokens (HTTP calls to --server), and admin init (the store itself). A
// CLI-own row after `offers list` (they extend `offers`).
void add_market_commands(CLI::App& app);
// Only the top-level --server and --token of add_market_commands (`plan`, `catalog list|show` and
// `offers list` read them too): what a command line that names no market command declares.
void add_market_options(CLI::App& app);
bool market_requested();
// With --server: the answer of the server for `plan`, `catalog list` and `catalog show` (the server adds
// its market's live offers and availability); nullopt without --server or for another command.
std::optional<Result<Json>> remote_command(std::string_view command, const Json& request);
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

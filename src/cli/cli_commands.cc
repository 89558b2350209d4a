// The CLI's one command table (issue #12: a person who adds a command touches one place). A row per
// command, in the order `gpuplan --help` lists them; one loop makes the CLI11 subcommands. What a row
// does not say comes from the one place that owns it: the description from the library's command
// table (command_description), the options with their types, ranges, defaults, help and positional
// arguments from data/options.yaml (add_declared_options).
#include <algorithm>
#include <array>

#include "cli/cli_handoff.h"

namespace gpuplan::cli {

// bench (cli_bench.cc, issue #16): SIGINT handling, the table, the --out file (bench_status writes it), and
// bench check's exit 14 when the file fails. Declared here, the one place that uses them.
Result<Json> prepare_bench(Json request);
std::string render_bench(const Json& result, const Json& request, const OutputFormat& fmt);
int bench_status(const Json& result);
std::string render_bench_check(const Json& result, const Json& request, const OutputFormat& fmt);
int bench_check_status(const Json& result);
Result<Json> prepare_bench_check(Json request);

namespace {

// The CLI's group words: `gpuplan mig` alone lists its subcommands. Not library commands, so their
// one-line help is here.
struct GroupRow {
  std::string_view word;
  std::string_view description;
};
constexpr GroupRow kGroups[] = {
    {"catalog", "GPUs and MIG profiles in the catalog, with sources"},
    {"mig", "Share GPUs with MIG: profiles, layout checks, fleet packing"},
    {"offers", "Providers' GPU offers and prices"},
    {"models", "The built-in model zoo"},
};

constexpr CommandRow kCommandRows[] = {
    {.path = "catalog list", .command = "catalog.list", .render = render_catalog_list},
    {.path = "catalog show", .command = "catalog.show", .render = render_catalog_show},
    {.path = "compare", .command = "compare", .render = render_compare, .prepare = read_model_file},
    {.path = "mig profiles", .command = "mig.profiles", .render = render_mig_profiles},
    {.path = "mig check", .command = "mig.check", .render = render_mig_check, .status = mig_check_status},
    {.path = "mig layouts", .command = "mig.layouts", .render = render_mig_layouts},
    {.path = "mig pack", .command = "mig.pack", .render = render_mig_pack},
    {.path = "offers list", .command = "offers.list", .render = render_offers_list},
    {.path = "offers import", .command = "", .add = add_offers_import_command},  // a file in, a file out
    {.path = "fit", .command = "fit", .render = render_fit, .prepare = read_model_file},
    {.path = "validate", .command = "validate", .render = render_validate},
    {.path = "serve", .command = "", .add = add_serve_command},
    {.path = "agent", .command = "", .add = add_agent_command},  // the node agent (src/agent/): an HTTP client
    {.path = "perf", .command = "perf", .render = render_perf, .prepare = read_model_file},
    {.path = "plan", .command = "plan", .render = render_plan, .prepare = read_model_file},
    {.path = "models list", .command = "models.list", .render = render_models_list},
    {.path = "vocabulary", .command = "vocabulary", .render = render_vocabulary},
    // `bench` runs alone and is the group of `bench check` (main runs the deepest parsed command).
    {.path = "bench", .command = "bench", .render = render_bench, .prepare = prepare_bench, .status = bench_status},
    {.path = "bench check",
     .command = "bench.check",
     .render = render_bench_check,
     .prepare = prepare_bench_check,
     .status = bench_check_status},
    // The market's commands (admin, nodes, offers create|delete and `offers list --server`, rent,
    // rentals, usage, tenants, tokens) are an HTTP client of `gpuplan serve` (cli_market.cc): their
    // options are the market's JSON bodies, not data/options.yaml's request keys, and they run without a
    // catalog, so they add themselves, after `offers list`, which they extend.
    {.path = "admin nodes rent rentals usage tenants tokens", .command = "", .add = add_market_commands},
    // The hand-off (cli_handoff.cc): `k8s render`, and `nodes import-slurm` added to the market's `nodes`.
    {.path = "k8s nodes", .command = "", .add = add_handoff_commands},
};

// The subcommand a group word names, made (with its help) the first time a row uses it.
CLI::App* group_app(CLI::App& app, std::string_view word) {
  const std::string name(word);
  for (CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == name) return sub;
  }
  const auto* g =
      std::find_if(std::begin(kGroups), std::end(kGroups), [&](const GroupRow& r) { return r.word == word; });
  CLI::App* group = app.add_subcommand(name, g == std::end(kGroups) ? std::string() : std::string(g->description));
  group->require_subcommand(1);
  return group;
}

// Whether the command line names this row: its words appear in order, one after another (a group
// row "mig pack": "mig" then "pack"). Over-matching costs only start-up time (a value that happens to
// equal a command word); a row the line names is never missed, since CLI11 matches subcommands by
// their exact word.
bool named(std::string_view path, std::span<const std::string_view> words) {
  if (words.empty()) return true;
  const size_t space = path.find(' ');
  const std::string_view first = path.substr(0, space);
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] != first) continue;
    if (space == std::string_view::npos) return true;
    if (i + 1 < words.size() && words[i + 1] == path.substr(space + 1)) return true;
  }
  return false;
}

// Whether the command line names a command of this row: its first word (a group or a command), or for
// a CLI-own row any word of its path (the top-level commands it adds). The market's row also extends
// `offers` (create, delete, list --server). Over-matching costs only start-up time, as in named().
bool touched(const CommandRow& row, std::span<const std::string_view> words) {
  if (words.empty()) return true;
  auto has = [&](std::string_view w) { return std::find(words.begin(), words.end(), w) != words.end(); };
  if (!row.add) return has(row.path.substr(0, row.path.find(' ')));
  if (row.add == add_market_commands && has("offers")) return true;
  for (size_t start = 0; start < row.path.size();) {
    const size_t end = std::min(row.path.find(' ', start), row.path.size());
    if (has(row.path.substr(start, end - start))) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

std::span<const CommandRow> command_rows() { return kCommandRows; }

void add_commands(CLI::App& app, std::vector<std::unique_ptr<CliCommand>>& commands,
                  std::span<const std::string_view> argv_words) {
  const bool some = std::any_of(std::begin(kCommandRows), std::end(kCommandRows),
                                [&](const CommandRow& r) { return touched(r, argv_words); });
  const bool version_only = !some && std::find(argv_words.begin(), argv_words.end(), "--version") != argv_words.end();
  // The market's row extends the `offers` group, so a market command needs the offers rows declared.
  const bool market = std::any_of(std::begin(kCommandRows), std::end(kCommandRows), [&](const CommandRow& r) {
    return r.add == add_market_commands && touched(r, argv_words);
  });
  for (const CommandRow& row : kCommandRows) {
    const bool wanted = touched(row, argv_words) || (market && row.path.substr(0, row.path.find(' ')) == "offers");
    if (version_only || (some && !wanted)) {
      if (row.add == add_market_commands) add_market_options(app);  // --server of plan, catalog, offers
      continue;
    }
    if (row.add) {
      row.add(app);
      continue;
    }
    CLI::App* parent = &app;
    std::string_view word = row.path;
    if (const size_t space = row.path.find(' '); space != std::string_view::npos) {
      parent = group_app(app, row.path.substr(0, space));
      word = row.path.substr(space + 1);
    }
    auto c = std::make_unique<CliCommand>();
    c->row = &row;
    c->app = parent->add_subcommand(std::string(word), command_description(row.command));
    if (named(row.path, argv_words)) add_declared_options(*c);
    commands.push_back(std::move(c));
  }
}

}  // namespace gpuplan::cli

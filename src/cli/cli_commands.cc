// The CLI's one command table (issue #12: a person who adds a command touches one place). A row per
// command, in the order `gpuplan --help` lists them; one loop makes the CLI11 subcommands. What a row
// does not say comes from the one place that owns it: the description from the library's command
// table (command_description), the options with their types, ranges, defaults, help and positional
// arguments from data/options.yaml (add_declared_options).
#include <algorithm>
#include <array>

#include "cli/cli.h"

namespace gpuplan::cli {

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
    // The market's commands (admin, nodes, offers create|delete and `offers list --server`, rent,
    // rentals, usage, tenants, tokens) are an HTTP client of `gpuplan serve` (cli_market.cc): their
    // options are the market's JSON bodies, not data/options.yaml's request keys, and they run without a
    // catalog, so they add themselves, after `offers list`, which they extend.
    {.path = "admin nodes rent rentals usage tenants tokens", .command = "", .add = add_market_commands},
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

}  // namespace

std::span<const CommandRow> command_rows() { return kCommandRows; }

void add_commands(CLI::App& app, std::vector<std::unique_ptr<CliCommand>>& commands) {
  for (const CommandRow& row : kCommandRows) {
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
    add_declared_options(*c);
    commands.push_back(std::move(c));
  }
}

}  // namespace gpuplan::cli

// gpuplan: the command-line interface. A thin main over the library (see cli/cli.h).
#include <algorithm>
#include <functional>
#include <iostream>
#include <string_view>
#include <vector>

#include "cli/cli.h"
#include "cli/cli_handoff.h"
#include "gpuplan/api.h"
#include "gpuplan/version.h"

namespace {

int run(int argc, char** argv) {
  using namespace gpuplan;
  CLI::App app{"gpuplan: choose, size, share and rent GPUs for AI work, with every figure sourced"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("gpuplan ") + gpuplan::kVersion);
  std::vector<std::string> catalog_dirs;
  cli::OutputFormat fmt;
  app.add_option("--catalog", catalog_dirs, "Folder of catalog YAML files that add or override entries")
      ->check(CLI::ExistingDirectory);
  app.add_flag("--json", fmt.json, "Print the result as JSON (the same document the HTTP API returns)");
  app.add_flag("--csv", fmt.csv, "Print tables as CSV");

  std::vector<std::unique_ptr<cli::CliCommand>> commands;
  const std::vector<std::string_view> words(argv + std::min(argc, 1), argv + argc);
  cli::add_commands(app, commands, words);
  // Options given after the subcommand (`gpuplan catalog list --json`) reach the top level too.
  std::function<void(CLI::App*)> fall = [&](CLI::App* a) {
    a->fallthrough(true);
    for (auto* sub : a->get_subcommands({})) fall(sub);
  };
  fall(&app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : exit_code(ErrorCode::kUsage);
  }

  auto report = [&](Error err) {
    // The library names request keys ('min_memory_gb'); on the command line they are options.
    if (!err.field.empty() && err.field.find(' ') == std::string::npos) {
      std::string option = "--" + err.field;
      std::replace(option.begin(), option.end(), '_', '-');
      for (size_t pos; (pos = err.message.find("'" + err.field + "'")) != std::string::npos;) {
        err.message.replace(pos, err.field.size() + 2, option);
      }
    }
    // Bytes that are not UTF-8 (from a file or an argument) print as U+FFFD instead of making dump throw.
    if (fmt.json)
      std::cerr << error_json(err).dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
    else
      std::cerr << "gpuplan: error: " << err.message << "\n";
    return exit_code(err.code);
  };

  if (cli::market_requested()) return cli::run_market(fmt, report);
  if (cli::agent_requested()) return cli::run_agent(fmt, report);  // no catalog: the server resolves names

  auto catalog = Catalog::load(catalog_dirs);
  if (!catalog) return report(catalog.error());
  Context ctx{*catalog};
  if (cli::handoff_requested()) return cli::run_handoff(**catalog, fmt, report);
  if (cli::serve_requested()) return cli::run_serve(ctx);
  if (cli::offers_import_requested()) return cli::run_offers_import(ctx, report);

  for (const auto& c : commands) {
    // The deepest parsed command: `bench check` rather than its parent `bench`.
    if (!c->app->parsed() || !c->app->get_subcommands().empty()) continue;
    auto built = c->request();
    if (!built) return report(built.error());
    Json request = std::move(built).value();
    const cli::CommandRow& row = *c->row;
    if (row.prepare) {
      auto prepared = row.prepare(std::move(request));
      if (!prepared) return report(prepared.error());
      request = std::move(prepared).value();
    }
    auto remote = cli::remote_command(row.command, request);  // --server: the server answers (its market)
    auto result = remote ? std::move(*remote) : run_command(ctx, row.command, request);
    if (!result) return report(result.error());
    if (fmt.json)
      std::cout << result->dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
    else
      std::cout << row.render(*result, request, fmt);
    return row.status ? row.status(*result) : 0;
  }
  std::cerr << app.help();
  return exit_code(ErrorCode::kUsage);
}

}  // namespace

int main(int argc, char** argv) {
  // A bug that throws (std::bad_alloc, a library invariant) ends with a one-line message and the
  // internal-error exit code, never with std::terminate's abort.
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "gpuplan: internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "gpuplan: internal error\n";
  }
  return gpuplan::exit_code(gpuplan::ErrorCode::kInternal);
}

// The CLI's one command table (src/cli/cli_commands.cc, issue #12) against the library's: every library
// command has exactly one CLI row, every row names a library command or adds a CLI-own command, and the
// subcommands the loop makes carry the library's description and the declared options.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "gpuplan/api.h"
#include "gpuplan/options.h"

namespace gpuplan::cli {
namespace {

// The subcommand at a row's path ("mig pack": mig, then pack), or nullptr.
CLI::App* find_path(CLI::App& app, std::string_view path) {
  CLI::App* at = &app;
  while (!path.empty()) {
    const size_t space = path.find(' ');
    const std::string word(path.substr(0, space));
    CLI::App* next = nullptr;
    for (CLI::App* sub : at->get_subcommands({})) {
      if (sub->get_name() == word) next = sub;
    }
    if (!next) return nullptr;
    at = next;
    path = space == std::string_view::npos ? std::string_view() : path.substr(space + 1);
  }
  return at;
}

TEST(CliCommands, EveryLibraryCommandHasOneCliRow) {
  const auto rows = command_rows();
  for (const std::string& command : command_names()) {
    const auto n = std::count_if(rows.begin(), rows.end(), [&](const CommandRow& r) { return r.command == command; });
    EXPECT_EQ(n, 1) << "the library command '" << command << "' needs one row in src/cli/cli_commands.cc";
    EXPECT_FALSE(command_description(command).empty()) << command << " has no description in its register line";
  }
}

TEST(CliCommands, EveryRowIsALibraryCommandOrAddsItself) {
  const auto names = command_names();
  for (const CommandRow& r : command_rows()) {
    EXPECT_FALSE(r.path.empty());
    if (r.command.empty()) {
      EXPECT_NE(r.add, nullptr) << r.path;
      continue;
    }
    EXPECT_EQ(r.add, nullptr) << r.path;
    EXPECT_NE(r.render, nullptr) << r.path;
    EXPECT_NE(std::find(names.begin(), names.end(), std::string(r.command)), names.end())
        << "'" << r.path << "' names '" << r.command << "', which run_command does not know";
  }
  EXPECT_EQ(command_description("no.such.command"), "");
}

TEST(CliCommands, TheLoopMakesEachRowsSubcommandWithItsDescriptionAndDeclaredOptions) {
  CLI::App app{"gpuplan"};
  std::vector<std::unique_ptr<CliCommand>> commands;
  add_commands(app, commands);
  auto table = option_table();
  ASSERT_TRUE(table);
  size_t library_rows = 0;
  for (const CommandRow& r : command_rows()) {
    // A CLI-own row adds at least its first word.
    CLI::App* sub = find_path(app, r.command.empty() ? r.path.substr(0, r.path.find(' ')) : r.path);
    if (r.command.empty()) {
      EXPECT_NE(sub, nullptr) << r.path;
      continue;
    }
    ++library_rows;
    ASSERT_NE(sub, nullptr) << r.path;
    EXPECT_EQ(sub->get_description(), command_description(r.command)) << r.path;
    for (const OptionSpec* o : (*table)->of_command(r.command)) {
      if (!o->cli || o->type == OptionType::kObject) continue;
      EXPECT_NE(sub->get_option_no_throw("--" + o->cli_name()), nullptr) << r.path << " lacks --" << o->cli_name();
    }
  }
  EXPECT_EQ(commands.size(), library_rows);
  EXPECT_EQ(library_rows, command_names().size());
  // The groups require a subcommand and carry their own help.
  for (const char* group : {"catalog", "mig", "offers", "models"}) {
    CLI::App* g = find_path(app, group);
    ASSERT_NE(g, nullptr) << group;
    EXPECT_FALSE(g->get_description().empty()) << group;
  }
}

}  // namespace
}  // namespace gpuplan::cli

// Request options, declared once as data (data/options.yaml, embedded). Every command's keys, their
// types, units, defaults, ranges, allowed values and help come from that one declaration: the request
// reader checks values by it (core/request.h, Request::read), the CLI makes its typed options from it,
// web/openapi.json's request schemas are generated from it and GET /api/v1/vocabulary serves it to the
// page. See data/options.yaml for the format.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/status.h"

namespace gpuplan {

enum class OptionType { kInt, kNumber, kBool, kFlag, kString, kEnum, kList, kFiles, kObject };
std::string_view option_type_name(OptionType t);

// A numeric range; an absent end is unbounded.
struct OptionRange {
  std::optional<double> min, max;
  bool min_open = false;  // "(0, 1]": 0 itself is out
  bool max_open = false;
  bool contains(double v) const;
  // "[1, 1048576]", "(0, 1]", "[0, ..)"; empty when unbounded both ways.
  std::string text() const;
  // The words of an error: "from 1 to 1048576", "above 0 and at most 1", "at least 0".
  std::string words() const;
};

// bugprone-exception-escape: its implicit destructor runs nlohmann::json's, which may allocate (it
// flattens nested values into a vector); bad_alloc there is fatal like any allocation's.
struct OptionSpec {  // NOLINT(bugprone-exception-escape)
  std::string name;  // request key, snake_case; the CLI long option is --name with '-' for '_'
  OptionType type = OptionType::kString;
  std::string unit;
  nlohmann::ordered_json default_value;  // null: none, or it depends on other keys (the help says)
  OptionRange range;
  std::string vocabulary;           // enum/list: the library's table of names ("engine"), or empty
  std::vector<std::string> values;  // enum/list: the words, when no vocabulary table holds them
  std::string group;                // workload, perf, offers, or empty
  std::vector<std::string> commands;
  std::vector<std::string> required;    // commands where it must be given
  std::vector<std::string> positional;  // commands where the CLI also takes it as a positional argument
  bool cli = true;                      // false: a request key only (no CLI option)
  size_t max_length = 0;                // string/enum/list words: at most this many bytes (0: no bound declared)
  size_t max_items = 0;                 // list: at most this many items (0: no bound declared)
  std::string items;                    // list of objects: the command whose declaration reads each item ("" : strings)
  std::string help;
  int line = 0;  // in data/options.yaml, for errors

  bool takes(std::string_view command) const;
  bool required_by(std::string_view command) const;
  bool positional_in(std::string_view command) const;
  std::string cli_name() const;  // "kv-cache"
};

class OptionTable {
 public:
  const std::vector<OptionSpec>& all() const { return options_; }
  // The declaration of `name` for `command` (an option may be declared once per meaning, like gpu).
  const OptionSpec* find(std::string_view name, std::string_view command) const;
  // The first declaration of `name` (the one of its group).
  const OptionSpec* find(std::string_view name) const;
  // The options of a command, in declaration order.
  std::vector<const OptionSpec*> of_command(std::string_view command) const;
  // The names of a group's options (workload, perf, offers), in declaration order.
  std::vector<std::string_view> group_keys(std::string_view group) const;
  // Every command named in the declaration.
  std::vector<std::string> commands() const;
  // The commands of a group.
  std::vector<std::string> group_commands(std::string_view group) const;
  // Read strictly (`strict:`): JSON types as declared (no "3" for 3, no 3 for "3"), every string within
  // its max_length, every list within its max_items, required keys refused when absent.
  bool strict(std::string_view command) const;
  // Keys it does not declare are ignored, not refused (`open:`; the market's bodies, issue #13: "more
  // keys are welcome").
  bool open(std::string_view command) const;

  // Parses and validates a declaration: unknown fields, types, ranges that do not parse, defaults
  // outside their range or of the wrong type, an enum with neither vocabulary nor values, duplicate
  // (name, command) pairs, unknown groups. Errors name the file and line.
  static Result<OptionTable> parse(const std::string& file, std::string_view text);
  // The table as a compact binary image (src/catalog/image.h), and back: the build compiles
  // data/options.yaml into one (tools/compile_data.cc) so that start-up parses no YAML. Two tables are
  // equal exactly when their images are. A corrupt image is an internal error.
  std::string to_image() const;
  static Result<OptionTable> from_image(std::string_view bytes);

 private:
  std::vector<OptionSpec> options_;
  std::vector<std::pair<std::string, std::vector<std::string>>> groups_;
  std::vector<std::string> strict_, open_;
};

// The embedded declaration (data/options.yaml), parsed once; an error when it does not validate
// (tests/unit/options_test.cc fails first).
Result<const OptionTable*> option_table();
// The declaration of `name` for `command` in the embedded table, or an internal error naming it.
Result<const OptionSpec*> option_spec(std::string_view name, std::string_view command = {});

}  // namespace gpuplan

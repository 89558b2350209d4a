// Helpers for reading data files with yaml-cpp and reporting errors that name the file, the line,
// the entry and the field.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/status.h"

namespace gpuplan::yaml {

// "data/gpus/a100.yaml:12" for a node, or just the file when the node has no position.
std::string where(const std::string& file, const YAML::Node& node);

// An invalid-data error: "<file>:<line>: <entry>: <field>: <message>".
Error data_error(const std::string& file, const YAML::Node& node, const std::string& entry, const std::string& field,
                 const std::string& message);

// Fails when `map` holds a key outside `allowed`, naming the key and listing the allowed ones.
Status check_keys(const std::string& file, const YAML::Node& map, const std::string& entry,
                  std::initializer_list<std::string_view> allowed);

Result<std::string> get_string(const std::string& file, const YAML::Node& map, const std::string& entry,
                               const char* key, bool required);
Result<double> get_number(const std::string& file, const YAML::Node& map, const std::string& entry, const char* key,
                          bool required, double fallback = 0);
Result<int> get_int(const std::string& file, const YAML::Node& map, const std::string& entry, const char* key,
                    bool required, int fallback = 0);
Result<bool> get_bool(const std::string& file, const YAML::Node& map, const std::string& entry, const char* key,
                      bool required, bool fallback = false);
// A whole number in [lo, hi] (or `fallback` when absent and not required), with the file, line, entry
// and field in the error ("must be between lo and hi, got v").
Result<int64_t> bounded_int(const std::string& file, const YAML::Node& map, const std::string& entry, const char* key,
                            bool required, int64_t fallback, int64_t lo, int64_t hi);
Result<std::vector<std::string>> get_string_list(const std::string& file, const YAML::Node& map,
                                                 const std::string& entry, const char* key);
Result<std::vector<int>> get_int_list(const std::string& file, const YAML::Node& map, const std::string& entry,
                                      const char* key);

// Bounds on what one document may expand to. yaml-cpp shares the node behind an alias, but every
// reader (and to_json) walks the expanded tree, so 9 nested levels of 9 aliases ("billion laughs",
// 731 bytes) would be walked as 10^9 nodes.
// Nodes that aliases add beyond the ones written: shared blocks in hand-written fleets and requests
// add a few hundred; 100,000 walked nodes cost a reader about 10 ms and a few MB as JSON.
constexpr uint64_t kMaxAliasExpandedNodes = 100000;
// Alias uses in one document: none of the shipped data uses any; a hand-written file reuses a block
// a few dozen times at most.
constexpr uint64_t kMaxAliases = 1000;
// Nodes to_json converts: ten times what an alias-free document inside the server's 1 MiB body can
// hold (at least 2 bytes a node), so only an expanded or huge local file reaches it.
constexpr uint64_t kMaxJsonNodes = 5000000;

// Parses the first document, turning yaml-cpp exceptions into an invalid-data error with the
// position. Before loading, one pass over the parser's events refuses (kLimit, naming the limit)
// more than kMaxAliases aliases or more than kMaxAliasExpandedNodes nodes added by them, and
// (kInvalidData) a key that is a list or a mapping (`? [a, b] : 1`) or an alias to an anchor that is
// not complete yet (a cycle). Nodes from parse() are safe for every reader and for to_json. The
// pass also stops with kCancelled once the thread's command is cancelled (include/gpuplan/cancel.h).
Result<YAML::Node> parse(const std::string& file, std::string_view text);

}  // namespace gpuplan::yaml

#include <nlohmann/json.hpp>

namespace gpuplan::yaml {

// A YAML document as JSON: plain scalars become numbers, booleans or null when they read as such
// (YAML 1.2 core schema), quoted scalars stay strings. Fails (kLimit) past `max_nodes` walked nodes
// (aliases count each time they are walked) and (kInvalidData) on a key that is not a scalar;
// `file` names the input in the message.
Result<nlohmann::ordered_json> to_json(const YAML::Node& node, const std::string& file,
                                       uint64_t max_nodes = kMaxJsonNodes);

}  // namespace gpuplan::yaml

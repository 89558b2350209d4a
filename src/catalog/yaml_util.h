// Helpers for reading data files with yaml-cpp and reporting errors that name the file, the line,
// the entry and the field.
#pragma once

#include <yaml-cpp/yaml.h>

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
Result<std::vector<std::string>> get_string_list(const std::string& file, const YAML::Node& map,
                                                 const std::string& entry, const char* key);
Result<std::vector<int>> get_int_list(const std::string& file, const YAML::Node& map, const std::string& entry,
                                      const char* key);

// Parses a whole document, turning yaml-cpp exceptions into an invalid-data error with the position.
Result<YAML::Node> parse(const std::string& file, std::string_view text);

}  // namespace gpuplan::yaml

#include <nlohmann/json.hpp>

namespace gpuplan::yaml {

// A YAML document as JSON: plain scalars become numbers, booleans or null when they read as such
// (YAML 1.2 core schema), quoted scalars stay strings.
nlohmann::ordered_json to_json(const YAML::Node& node);

}  // namespace gpuplan::yaml

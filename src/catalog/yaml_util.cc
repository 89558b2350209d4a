#include "catalog/yaml_util.h"

#include <cmath>

namespace gpuplan::yaml {

std::string where(const std::string& file, const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.line < 0) return file;
  return file + ":" + std::to_string(mark.line + 1);
}

Error data_error(const std::string& file, const YAML::Node& node, const std::string& entry, const std::string& field,
                 const std::string& message) {
  std::string text = where(file, node) + ": ";
  if (!entry.empty()) text += entry + ": ";
  if (!field.empty()) text += "field '" + field + "': ";
  text += message;
  std::string location = file;
  if (!entry.empty()) location += ": " + entry;
  if (!field.empty()) location += ": " + field;
  return Error{ErrorCode::kInvalidData, text, location};
}

Status check_keys(const std::string& file, const YAML::Node& map, const std::string& entry,
                  std::initializer_list<std::string_view> allowed) {
  if (!map.IsMap()) return data_error(file, map, entry, "", "expected a mapping of keys to values");
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>();
    bool known = false;
    for (std::string_view a : allowed) known = known || a == key;
    if (!known) {
      std::string list;
      for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      return data_error(file, kv.first, entry, key, "unknown key; allowed keys are: " + list);
    }
  }
  return Status::Ok();
}

namespace {
YAML::Node child(const YAML::Node& map, const char* key) { return map.IsMap() ? map[key] : YAML::Node(); }
}  // namespace

Result<std::string> get_string(const std::string& file, const YAML::Node& map, const std::string& entry,
                               const char* key, bool required) {
  YAML::Node n = child(map, key);
  if (!n || n.IsNull()) {
    if (required) return data_error(file, map, entry, key, "required field is missing");
    return std::string();
  }
  if (!n.IsScalar()) return data_error(file, n, entry, key, "expected a single value");
  return n.Scalar();
}

Result<double> get_number(const std::string& file, const YAML::Node& map, const std::string& entry, const char* key,
                          bool required, double fallback) {
  YAML::Node n = child(map, key);
  if (!n || n.IsNull()) {
    if (required) return data_error(file, map, entry, key, "required field is missing");
    return fallback;
  }
  double value = 0;
  if (!n.IsScalar() || !YAML::convert<double>::decode(n, value) || !std::isfinite(value)) {
    return data_error(file, n, entry, key, "expected a number, got '" + (n.IsScalar() ? n.Scalar() : "?") + "'");
  }
  return value;
}

Result<int> get_int(const std::string& file, const YAML::Node& map, const std::string& entry, const char* key,
                    bool required, int fallback) {
  auto v = get_number(file, map, entry, key, required, fallback);
  if (!v) return v.error();
  if (*v != std::floor(*v) || std::fabs(*v) > 2e9) {
    return data_error(file, map[key], entry, key, "expected a whole number");
  }
  return static_cast<int>(*v);
}

Result<bool> get_bool(const std::string& file, const YAML::Node& map, const std::string& entry, const char* key,
                      bool required, bool fallback) {
  YAML::Node n = child(map, key);
  if (!n || n.IsNull()) {
    if (required) return data_error(file, map, entry, key, "required field is missing");
    return fallback;
  }
  bool value = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, value)) {
    return data_error(file, n, entry, key, "expected true or false");
  }
  return value;
}

Result<std::vector<std::string>> get_string_list(const std::string& file, const YAML::Node& map,
                                                 const std::string& entry, const char* key) {
  std::vector<std::string> out;
  YAML::Node n = child(map, key);
  if (!n || n.IsNull()) return out;
  if (!n.IsSequence()) return data_error(file, n, entry, key, "expected a list");
  for (const auto& item : n) {
    if (!item.IsScalar()) return data_error(file, item, entry, key, "expected a list of strings");
    out.push_back(item.Scalar());
  }
  return out;
}

Result<std::vector<int>> get_int_list(const std::string& file, const YAML::Node& map, const std::string& entry,
                                      const char* key) {
  std::vector<int> out;
  YAML::Node n = child(map, key);
  if (!n || n.IsNull()) return out;
  if (!n.IsSequence()) return data_error(file, n, entry, key, "expected a list of whole numbers");
  for (const auto& item : n) {
    int v = 0;
    if (!item.IsScalar() || !YAML::convert<int>::decode(item, v)) {
      return data_error(file, item, entry, key, "expected a list of whole numbers");
    }
    out.push_back(v);
  }
  return out;
}

Result<YAML::Node> parse(const std::string& file, std::string_view text) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    std::string msg = file;
    if (e.mark.line >= 0) msg += ":" + std::to_string(e.mark.line + 1);
    return Error{ErrorCode::kInvalidData, msg + ": not valid YAML: " + e.msg, file};
  }
}

}  // namespace gpuplan::yaml

namespace gpuplan::yaml {

nlohmann::ordered_json to_json(const YAML::Node& node) {
  using J = nlohmann::ordered_json;
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Sequence: {
      J arr = J::array();
      for (const auto& item : node) arr.push_back(to_json(item));
      return arr;
    }
    case YAML::NodeType::Map: {
      J obj = J::object();
      for (const auto& kv : node) obj[kv.first.as<std::string>()] = to_json(kv.second);
      return obj;
    }
    case YAML::NodeType::Scalar:
      break;
  }
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;  // quoted: always a string
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s == "null" || s == "~" || s == "Null" || s == "NULL") return nullptr;
  if (!s.empty()) {
    char* end = nullptr;
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (end == s.c_str() + s.size()) return i;
    const double d = std::strtod(s.c_str(), &end);
    if (end == s.c_str() + s.size() && std::isfinite(d)) return d;
  }
  return s;
}

}  // namespace gpuplan::yaml

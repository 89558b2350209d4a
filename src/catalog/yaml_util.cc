#include "catalog/yaml_util.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <cerrno>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>

#include "gpuplan/cancel.h"

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
    if (!kv.first.IsScalar())
      return data_error(file, kv.first, entry, "", "a key must be a single value, not a list or a mapping");
    const std::string key = kv.first.Scalar();
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
  GPUPLAN_TRY(v, get_number(file, map, entry, key, required, fallback));
  if (v != std::floor(v) || std::fabs(v) > 2e9) {
    return data_error(file, map[key], entry, key, "expected a whole number");
  }
  return static_cast<int>(v);
}

Result<int64_t> bounded_int(const std::string& file, const YAML::Node& map, const std::string& entry, const char* key,
                            bool required, int64_t fallback, int64_t lo, int64_t hi) {
  YAML::Node n = map.IsMap() ? map[key] : YAML::Node();
  if (!required && (!n || n.IsNull())) return fallback;
  GPUPLAN_TRY(v, get_int(file, map, entry, key, required, 0));
  if (v < lo || v > hi) {
    return data_error(
        file, n, entry, key,
        "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + std::to_string(v));
  }
  return int64_t{v};
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

namespace {

uint64_t saturating_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

// One pass over the parser's events of the first document: the expanded size of every anchored node
// (so that an alias costs what walking it costs), alias uses, and keys that are collections.
class BudgetCheck : public YAML::EventHandler {
 public:
  explicit BudgetCheck(std::string file) : file_(std::move(file)) {}

  std::optional<Error> error;

  // Thrown through yaml-cpp's parser to stop it when the command is cancelled (parsing a 1 MiB
  // document takes a few hundred ms; yaml-cpp itself never looks at the deadline).
  struct Cancelled {};

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { leaf(mark, anchor); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, const std::string&) override {
    leaf(mark, anchor);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (error) return;
    if (++aliases_ > kMaxAliases) {
      fail(ErrorCode::kLimit, mark,
           "more than " + std::to_string(kMaxAliases) + " aliases (*name) in one document (limit kMaxAliases)");
      return;
    }
    auto it = sizes_.find(anchor);
    if (it == sizes_.end()) {
      fail(ErrorCode::kInvalidData, mark, "an alias refers to an anchor that is not complete here (a cycle)");
      return;
    }
    if (key_position() && !it->second.scalar) {
      fail(ErrorCode::kInvalidData, mark, "a key must be a single value, not a list or a mapping");
      return;
    }
    added_ = saturating_add(added_, it->second.nodes);
    if (added_ > kMaxAliasExpandedNodes) {
      fail(ErrorCode::kLimit, mark,
           "aliases expand the document by more than " + std::to_string(kMaxAliasExpandedNodes) +
               " nodes (limit kMaxAliasExpandedNodes); write the repeated blocks out or shorten them");
      return;
    }
    add_child(it->second.nodes);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, anchor, true);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapEnd() override { close(); }

 private:
  struct Frame {
    YAML::anchor_t anchor = 0;
    bool map = false;
    uint64_t children = 0;  // events directly inside (keys and values for maps)
    uint64_t nodes = 1;     // expanded size, itself included
  };
  struct Size {
    uint64_t nodes = 1;
    bool scalar = true;
  };

  // Events between deadline checks: a few microseconds of parsing each.
  static constexpr uint32_t kEventsPerCancelCheck = 1024;

  void tick() {
    if (++events_ % kEventsPerCancelCheck == 0 && cancel_requested()) throw Cancelled{};
  }

  bool key_position() const { return !stack_.empty() && stack_.back().map && stack_.back().children % 2 == 0; }

  void add_child(uint64_t nodes) {
    tick();
    if (stack_.empty()) return;
    ++stack_.back().children;
    stack_.back().nodes = saturating_add(stack_.back().nodes, nodes);
  }
  void leaf(const YAML::Mark&, YAML::anchor_t anchor) {
    if (error) return;
    if (anchor != YAML::NullAnchor) sizes_[anchor] = Size{1, true};
    add_child(1);
  }
  void open(const YAML::Mark& mark, YAML::anchor_t anchor, bool map = false) {
    if (error) return;
    if (key_position()) {
      fail(ErrorCode::kInvalidData, mark, "a key must be a single value, not a list or a mapping");
      return;
    }
    stack_.push_back(Frame{anchor, map, 0, 1});
  }
  void close() {
    if (error || stack_.empty()) return;
    const Frame f = stack_.back();
    stack_.pop_back();
    if (f.anchor != YAML::NullAnchor) sizes_[f.anchor] = Size{f.nodes, false};
    add_child(f.nodes);
  }
  void fail(ErrorCode code, const YAML::Mark& mark, const std::string& message) {
    std::string where = file_;
    if (mark.line >= 0) where += ":" + std::to_string(mark.line + 1);
    error = Error{code, where + ": " + message, file_};
  }

  std::string file_;
  std::vector<Frame> stack_;
  std::map<YAML::anchor_t, Size> sizes_;
  uint64_t aliases_ = 0;
  uint64_t added_ = 0;
  uint32_t events_ = 0;
};

Error yaml_exception_error(const std::string& file, const YAML::Exception& e) {
  std::string msg = file;
  if (e.mark.line >= 0) msg += ":" + std::to_string(e.mark.line + 1);
  return Error{ErrorCode::kInvalidData, msg + ": not valid YAML: " + e.msg, file};
}

}  // namespace

Result<YAML::Node> parse(const std::string& file, std::string_view text) {
  try {
    {
      std::istringstream in{std::string(text)};
      YAML::Parser parser(in);
      BudgetCheck check(file);
      try {
        parser.HandleNextDocument(check);
      } catch (const BudgetCheck::Cancelled&) {
        return cancelled_error();
      }
      if (check.error) return *check.error;
    }
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return yaml_exception_error(file, e);
  }
}

}  // namespace gpuplan::yaml

namespace gpuplan::yaml {

namespace {

using OJson = nlohmann::ordered_json;

Result<OJson> convert(const YAML::Node& node, const std::string& file, uint64_t max_nodes, uint64_t& walked) {
  if (++walked > max_nodes) {
    return limit_error(file + ": more than " + std::to_string(max_nodes) +
                           " nodes to convert (limit kMaxJsonNodes; aliases count each time they are used)",
                       file);
  }
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return OJson(nullptr);
    case YAML::NodeType::Sequence: {
      OJson arr = OJson::array();
      for (const auto& item : node) {
        auto v = convert(item, file, max_nodes, walked);  // not GPUPLAN_TRY: its const value would be copied
        if (!v) return v.error();
        arr.push_back(std::move(*v));
      }
      return arr;
    }
    case YAML::NodeType::Map: {
      OJson obj = OJson::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          return data_error(file, kv.first, "", "", "a key must be a single value, not a list or a mapping");
        }
        auto v = convert(kv.second, file, max_nodes, walked);  // moved, not copied (see above)
        if (!v) return v.error();
        obj[kv.first.Scalar()] = std::move(*v);
      }
      return obj;
    }
    case YAML::NodeType::Scalar:
      break;
  }
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return OJson(s);  // quoted: always a string
  if (s == "true" || s == "True" || s == "TRUE") return OJson(true);
  if (s == "false" || s == "False" || s == "FALSE") return OJson(false);
  if (s == "null" || s == "~" || s == "Null" || s == "NULL") return OJson(nullptr);
  if (!s.empty()) {
    char* end = nullptr;
    errno = 0;
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (end == s.c_str() + s.size() && errno != ERANGE) return OJson(i);
    const double d = std::strtod(s.c_str(), &end);
    if (end == s.c_str() + s.size() && std::isfinite(d)) return OJson(d);
  }
  return OJson(s);
}

}  // namespace

Result<nlohmann::ordered_json> to_json(const YAML::Node& node, const std::string& file, uint64_t max_nodes) {
  uint64_t walked = 0;
  try {
    return convert(node, file, max_nodes, walked);
  } catch (const YAML::Exception& e) {
    return yaml_exception_error(file, e);
  }
}

}  // namespace gpuplan::yaml

// The option declaration (data/options.yaml): parsed and validated once; see include/gpuplan/options.h.
#include "gpuplan/options.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "catalog/compiled.h"
#include "catalog/image.h"
#include "catalog/yaml_util.h"
#include "core/decimal.h"
#include "gpuplan/cancel.h"
#include "gpuplan/embedded.h"

namespace gpuplan {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kOptionsFile = "data/options.yaml";
// The largest max_length / max_items a declaration may state: a request body is far smaller (the
// server's body cap is 1 MiB), so a bigger bound is a typo.
constexpr int64_t kMaxDeclaredBound = 1 << 20;

struct TypeRow {
  OptionType type;
  std::string_view name;
};
constexpr TypeRow kTypes[] = {
    {OptionType::kInt, "int"},   {OptionType::kNumber, "number"}, {OptionType::kBool, "bool"},
    {OptionType::kFlag, "flag"}, {OptionType::kString, "string"}, {OptionType::kEnum, "enum"},
    {OptionType::kList, "list"}, {OptionType::kFiles, "files"},   {OptionType::kObject, "object"}};

bool contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

// "[1, 1048576]", "(0, 1]", "[0, ..)".
std::optional<OptionRange> parse_range(std::string_view s) {
  auto trim = [](std::string_view t) {
    while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
    return t;
  };
  s = trim(s);
  if (s.size() < 5) return std::nullopt;
  const char open = s.front(), close = s.back();
  if ((open != '[' && open != '(') || (close != ']' && close != ')')) return std::nullopt;
  const std::string_view inner = s.substr(1, s.size() - 2);
  const size_t comma = inner.find(',');
  if (comma == std::string_view::npos) return std::nullopt;
  OptionRange r;
  r.min_open = open == '(';
  r.max_open = close == ')';
  auto end = [&](std::string_view t, std::optional<double>& out) {
    t = trim(t);
    if (t == "..") return true;
    const auto v = parse_decimal(std::string(t));
    if (!v) return false;
    out = *v;
    return true;
  };
  if (!end(inner.substr(0, comma), r.min) || !end(inner.substr(comma + 1), r.max)) return std::nullopt;
  if (r.min && r.max && *r.min > *r.max) return std::nullopt;
  return r;
}

}  // namespace

std::string_view option_type_name(OptionType t) {
  for (const auto& r : kTypes) {
    if (r.type == t) return r.name;
  }
  return "?";
}

bool OptionRange::contains(double v) const {
  if (min && (min_open ? v <= *min : v < *min)) return false;
  if (max && (max_open ? v >= *max : v > *max)) return false;
  return true;
}

std::string OptionRange::text() const {
  if (!min && !max) return "";
  return std::string(min_open ? "(" : "[") + (min ? number_text(*min) : "..") + ", " +
         (max ? number_text(*max) : "..") + (max_open ? ")" : "]");
}

std::string OptionRange::words() const {
  if (min && max && !min_open && !max_open) return "from " + number_text(*min) + " to " + number_text(*max);
  std::string out;
  if (min) out = (min_open ? "above " : "at least ") + number_text(*min);
  if (max) out += (out.empty() ? "" : " and ") + std::string(max_open ? "below " : "at most ") + number_text(*max);
  return out;
}

bool OptionTable::strict(std::string_view command) const { return contains(strict_, command); }
bool OptionTable::open(std::string_view command) const { return contains(open_, command); }

bool OptionSpec::takes(std::string_view command) const { return contains(commands, command); }
bool OptionSpec::required_by(std::string_view command) const { return contains(required, command); }
bool OptionSpec::positional_in(std::string_view command) const { return contains(positional, command); }
std::string OptionSpec::cli_name() const {
  std::string n = name;
  std::replace(n.begin(), n.end(), '_', '-');
  return n;
}

const OptionSpec* OptionTable::find(std::string_view name, std::string_view command) const {
  for (const auto& o : options_) {
    if (o.name == name && o.takes(command)) return &o;
  }
  return nullptr;
}

const OptionSpec* OptionTable::find(std::string_view name) const {
  for (const auto& o : options_) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

std::vector<const OptionSpec*> OptionTable::of_command(std::string_view command) const {
  std::vector<const OptionSpec*> out;
  for (const auto& o : options_) {
    if (o.takes(command)) out.push_back(&o);
  }
  return out;
}

std::vector<std::string_view> OptionTable::group_keys(std::string_view group) const {
  std::vector<std::string_view> out;
  for (const auto& o : options_) {
    if (o.group == group) out.push_back(o.name);
  }
  return out;
}

std::vector<std::string> OptionTable::commands() const {
  std::vector<std::string> out;
  for (const auto& o : options_) {
    for (const auto& c : o.commands) {
      if (!contains(out, c)) out.push_back(c);
    }
  }
  return out;
}

std::vector<std::string> OptionTable::group_commands(std::string_view group) const {
  for (const auto& [name, commands] : groups_) {
    if (name == group) return commands;
  }
  return {};
}

Result<OptionTable> OptionTable::parse(const std::string& file, std::string_view text) {
  GPUPLAN_TRY(root, yaml::parse(file, text));
  GPUPLAN_CHECK(yaml::check_keys(file, root, "", {"groups", "strict", "open", "options"}));
  OptionTable t;
  if (root["groups"]) {
    if (!root["groups"].IsMap()) return yaml::data_error(file, root["groups"], "groups", "", "expected a mapping");
    for (const auto& g : root["groups"]) {
      const std::string name = g.first.as<std::string>();
      GPUPLAN_TRY(commands, yaml::get_string_list(file, root["groups"], "groups", name.c_str()));
      if (commands.empty()) return yaml::data_error(file, g.second, "groups", name, "a group needs its commands");
      t.groups_.emplace_back(name, commands);
    }
  }
  const YAML::Node list = root["options"];
  if (!list || !list.IsSequence()) return yaml::data_error(file, root, "", "options", "expected a list of options");
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node n = list[i];  // a Node, not the iterator's value (no slicing)
    const std::string entry = "option " + std::to_string(t.options_.size() + 1);
    if (!n.IsMap()) return yaml::data_error(file, n, entry, "", "expected a mapping");
    GPUPLAN_CHECK(
        yaml::check_keys(file, n, entry,
                         {"name", "type", "unit", "default", "range", "vocabulary", "values", "group", "commands",
                          "required", "positional", "cli", "max_length", "max_items", "items", "help"}));
    OptionSpec o;
    o.line = static_cast<int>(n.Mark().line) + 1;
    GPUPLAN_TRY(name, yaml::get_string(file, n, entry, "name", true));
    o.name = name;
    const std::string at = "option '" + name + "'";
    auto bad = [&](const char* field, const std::string& message) {
      return yaml::data_error(file, n[field] ? n[field] : n, at, field, message);
    };
    if (name.empty() || name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
      return bad("name", "a request key is snake_case: lowercase letters, digits and '_'");
    }
    GPUPLAN_TRY(type, yaml::get_string(file, n, at, "type", true));
    const auto row =
        std::find_if(std::begin(kTypes), std::end(kTypes), [&](const TypeRow& r) { return r.name == type; });
    if (row == std::end(kTypes)) {
      return bad("type",
                 "unknown type '" + type + "'; use int, number, bool, flag, string, enum, list, files or object");
    }
    o.type = row->type;
    GPUPLAN_TRY(unit, yaml::get_string(file, n, at, "unit", false));
    GPUPLAN_TRY(vocabulary, yaml::get_string(file, n, at, "vocabulary", false));
    GPUPLAN_TRY(values, yaml::get_string_list(file, n, at, "values"));
    GPUPLAN_TRY(group, yaml::get_string(file, n, at, "group", false));
    GPUPLAN_TRY(commands, yaml::get_string_list(file, n, at, "commands"));
    GPUPLAN_TRY(required, yaml::get_string_list(file, n, at, "required"));
    GPUPLAN_TRY(positional, yaml::get_string_list(file, n, at, "positional"));
    GPUPLAN_TRY(cli, yaml::get_bool(file, n, at, "cli", false, true));
    GPUPLAN_TRY(help, yaml::get_string(file, n, at, "help", true));
    GPUPLAN_TRY(range_text, yaml::get_string(file, n, at, "range", false));
    GPUPLAN_TRY(max_length, yaml::bounded_int(file, n, at, "max_length", false, 0, 1, kMaxDeclaredBound));
    GPUPLAN_TRY(max_items, yaml::bounded_int(file, n, at, "max_items", false, 0, 1, kMaxDeclaredBound));
    GPUPLAN_TRY(items, yaml::get_string(file, n, at, "items", false));
    o.max_length = static_cast<size_t>(max_length);
    o.max_items = static_cast<size_t>(max_items);
    o.items = items;
    o.unit = unit;
    o.vocabulary = vocabulary;
    o.values = values;
    o.group = group;
    o.cli = cli;
    o.help = help;
    o.required = required;
    o.positional = positional;
    if (help.empty()) return bad("help", "every option needs one line of help");
    // Commands: the group's, or the entry's own; not both.
    if (!group.empty() && !commands.empty()) return bad("commands", "give group or commands, not both");
    if (!group.empty()) {
      o.commands = t.group_commands(group);
      if (o.commands.empty()) return bad("group", "unknown group '" + group + "'; groups: lists them");
    } else {
      o.commands = commands;
    }
    if (o.commands.empty()) return bad("commands", "which commands take it? give group or commands");
    for (const auto& c : o.required) {
      if (!o.takes(c)) return bad("required", "'" + c + "' is not one of its commands");
    }
    for (const auto& c : o.positional) {
      if (!o.takes(c)) return bad("positional", "'" + c + "' is not one of its commands");
    }
    for (const auto& c : o.commands) {
      if (!t.find(name, c)) continue;
      std::string message = "'" + name;
      message += "' is declared twice for command '";
      message += c;
      message += "'";
      return bad("name", message);
    }
    // Allowed values: enums and lists of words need a vocabulary or the words; nothing else has them.
    const bool worded = o.type == OptionType::kEnum || o.type == OptionType::kList;
    if (!vocabulary.empty() && !values.empty()) return bad("values", "give vocabulary or values, not both");
    if (o.type == OptionType::kEnum && vocabulary.empty() && values.empty()) {
      return bad("type", "an enum needs its vocabulary (a table of the library) or its values");
    }
    if (!worded && (!vocabulary.empty() || !values.empty())) {
      return bad("values", "only enum and list options have allowed values");
    }
    // Bounds of text and lists; a list of objects names the command that reads each item.
    const bool texty = o.type == OptionType::kString || o.type == OptionType::kEnum || o.type == OptionType::kList;
    if (o.max_length > 0 && (!texty || !o.items.empty())) {
      return bad("max_length", "only string, enum and list-of-words options have a max_length");
    }
    if ((o.max_items > 0 || !o.items.empty()) && o.type != OptionType::kList) {
      return bad(o.items.empty() ? "max_items" : "items", "only list options have max_items and items");
    }
    if (!o.items.empty() && (!vocabulary.empty() || !values.empty())) {
      return bad("items", "a list of objects has no allowed words: its items' command declares their keys");
    }
    // Ranges: numbers only.
    if (!range_text.empty()) {
      if (o.type != OptionType::kInt && o.type != OptionType::kNumber) {
        return bad("range", "only int and number options have a range");
      }
      const auto r = parse_range(range_text);
      if (!r) return bad("range", "'" + range_text + "' is not a range like [1, 1024], (0, 1] or [0, ..)");
      o.range = *r;
      if (o.type == OptionType::kInt &&
          ((r->min && *r->min != std::floor(*r->min)) || (r->max && *r->max != std::floor(*r->max)))) {
        return bad("range", "an int option's range ends are whole numbers");
      }
    }
    // The default: of the option's type, inside its range, one of its values.
    if (n["default"]) {
      GPUPLAN_TRY(d, yaml::to_json(n["default"], file));
      const bool ok = [&] {
        switch (o.type) {
          case OptionType::kInt:
            return d.is_number() && d.get<double>() == std::floor(d.get<double>());
          case OptionType::kNumber:
            return d.is_number();
          case OptionType::kBool:
          case OptionType::kFlag:
            return d.is_boolean();
          case OptionType::kString:
          case OptionType::kEnum:
            return d.is_string();
          case OptionType::kList:
            return d.is_array() && std::all_of(d.begin(), d.end(), [](const Json& x) { return x.is_string(); });
          case OptionType::kFiles:
          case OptionType::kObject:
            return false;
        }
        return false;
      }();
      if (!ok) return bad("default", "the default is not a value of type " + type);
      if (d.is_number() && !o.range.contains(d.get<double>())) {
        return bad("default", "the default " + d.dump() + " is outside the range " + o.range.text());
      }
      if (!o.values.empty() && d.is_string() && !contains(o.values, d.get<std::string>())) {
        return bad("default", "the default '" + d.get<std::string>() + "' is not one of its values");
      }
      o.default_value = d;
    }
    t.options_.push_back(std::move(o));
  }
  // The commands read strictly or openly, and the item commands of lists of objects, are declared
  // ones; a strict command bounds every string and list it reads.
  GPUPLAN_TRY(strict, yaml::get_string_list(file, root, "", "strict"));
  GPUPLAN_TRY(open, yaml::get_string_list(file, root, "", "open"));
  const std::vector<std::string> declared = t.commands();
  for (const auto* names : {&strict, &open}) {
    const char* field = names == &strict ? "strict" : "open";
    for (const auto& c : *names) {
      if (!contains(declared, c)) {
        return yaml::data_error(file, root[field], "", field, "'" + c + "' is not a command of any option");
      }
    }
  }
  t.strict_ = strict;
  t.open_ = open;
  for (size_t i = 0; i < t.options_.size(); ++i) {
    const OptionSpec& o = t.options_[i];
    const YAML::Node n = list[i];
    const std::string at = "option '" + o.name + "'";
    auto bad = [&](const char* field, const std::string& message) {
      return yaml::data_error(file, n[field] ? n[field] : n, at, field, message);
    };
    if (!o.items.empty() && !contains(declared, o.items)) {
      return bad("items", "'" + o.items + "' is not a command of any option");
    }
    for (const auto& c : o.commands) {
      if (!t.strict(c)) continue;
      const bool words = o.type == OptionType::kString || o.type == OptionType::kEnum ||
                         (o.type == OptionType::kList && o.items.empty());
      if (words && o.max_length == 0) {
        return bad("max_length", "'" + c + "' is read strictly: its strings need a max_length");
      }
      if (o.type == OptionType::kList && o.max_items == 0) {
        return bad("max_items", "'" + c + "' is read strictly: its lists need a max_items");
      }
    }
  }
  return t;
}

// "GPOT": the option table image's tag (src/catalog/image.h).
constexpr uint32_t kOptionsImageTag = 0x544f5047;

std::string OptionTable::to_image() const {
  image::Writer w;
  w.u32(kOptionsImageTag);
  w.u32(image::kFormatVersion);
  w.count(options_.size());
  for (const OptionSpec& o : options_) {
    w.str(o.name);
    w.u8(static_cast<uint8_t>(o.type));
    w.str(o.unit);
    // The default as JSON text (null when there is none): nlohmann writes numbers so they read back exactly.
    w.str(o.default_value.dump());
    w.opt_f64(o.range.min);
    w.opt_f64(o.range.max);
    w.boolean(o.range.min_open);
    w.boolean(o.range.max_open);
    w.str(o.vocabulary);
    w.strings(o.values);
    w.str(o.group);
    for (const auto* v : {&o.commands, &o.required, &o.positional}) w.strings(*v);
    w.boolean(o.cli);
    w.u64(o.max_length);
    w.u64(o.max_items);
    w.str(o.items);
    w.str(o.help);
    w.i32(o.line);
  }
  w.count(groups_.size());
  for (const auto& [name, commands] : groups_) {
    w.str(name);
    w.strings(commands);
  }
  w.strings(strict_);
  w.strings(open_);
  return w.bytes();
}

Result<OptionTable> OptionTable::from_image(std::string_view bytes) {
  image::Reader r(bytes);
  if (r.u32() != kOptionsImageTag || r.u32() != image::kFormatVersion) {
    return Error{ErrorCode::kInternal, "the compiled option table image is of another format; rebuild gpuplan", ""};
  }
  OptionTable t;
  t.options_.resize(r.count());
  for (OptionSpec& o : t.options_) {
    o.name = r.str();
    const uint8_t type = r.u8();
    if (type > static_cast<uint8_t>(OptionType::kObject)) return r.corrupt("option table (type)");
    o.type = static_cast<OptionType>(type);
    o.unit = r.str();
    o.default_value = Json::parse(r.str(), nullptr, false);
    if (o.default_value.is_discarded()) return r.corrupt("option table (default)");
    o.range.min = r.opt_f64();
    o.range.max = r.opt_f64();
    o.range.min_open = r.boolean();
    o.range.max_open = r.boolean();
    o.vocabulary = r.str();
    o.values = r.strings();
    o.group = r.str();
    for (auto* v : {&o.commands, &o.required, &o.positional}) *v = r.strings();
    o.cli = r.boolean();
    o.max_length = static_cast<size_t>(r.u64());
    o.max_items = static_cast<size_t>(r.u64());
    o.items = r.str();
    o.help = r.str();
    o.line = r.i32();
  }
  t.groups_.resize(r.count());
  for (auto& [name, commands] : t.groups_) {
    name = r.str();
    commands = r.strings();
  }
  t.strict_ = r.strings();
  t.open_ = r.strings();
  GPUPLAN_CHECK(r.finish("option table"));
  return t;
}

Result<const OptionTable*> option_table() {
  static const Result<OptionTable> table = []() -> Result<OptionTable> {
    // Parsed once for every later command: a request's deadline must not apply to it.
    const CancelScope uncancellable(nullptr);
    // The image the build compiled from data/options.yaml after validating it with parse() below; the
    // compile tool itself (tools/compile_data.cc) links an empty one and parses the YAML.
    if (!compiled::options_image().empty()) return OptionTable::from_image(compiled::options_image());
    for (const auto& f : embedded_files()) {
      if (f.path == kOptionsFile) return OptionTable::parse(std::string(kOptionsFile), f.contents);
    }
    return Error{ErrorCode::kInternal, std::string(kOptionsFile) + " is not embedded in this build", ""};
  }();
  if (!table) return table.error();
  return &*table;
}

Result<const OptionSpec*> option_spec(std::string_view name, std::string_view command) {
  GPUPLAN_TRY(table, option_table());
  const OptionSpec* o = command.empty() ? table->find(name) : table->find(name, command);
  if (!o) {
    return Error{ErrorCode::kInternal,
                 "option '" + std::string(name) + "'" + (command.empty() ? "" : " of " + std::string(command)) +
                     " is not declared in data/options.yaml",
                 std::string(name)};
  }
  return o;
}

}  // namespace gpuplan

// Every command's options, made from the one declaration (data/options.yaml): typed, with their
// range or allowed words, default and help. The values still travel as text in the request; the
// library checks them by the same declaration (core/request.h), so the CLI and the HTTP API refuse a
// value with the same message.
#include <algorithm>
#include <cstdio>

#include "api/vocabulary.h"
#include "cli/cli.h"

namespace gpuplan::cli {

namespace {

std::string type_label(OptionType t) {
  switch (t) {
    case OptionType::kInt:
      return "INT";
    case OptionType::kNumber:
      return "NUMBER";
    case OptionType::kBool:
      return "BOOL";
    case OptionType::kEnum:
      return "ENUM";
    case OptionType::kList:
      return "LIST";
    case OptionType::kFiles:
      return "FILE";
    case OptionType::kString:
    case OptionType::kFlag:
    case OptionType::kObject:
      return "TEXT";
  }
  return "TEXT";
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

// "[1..1048576]", "(0..1]", "[0..]": the declared range as the help shows it.
std::string range_label(const OptionRange& r) {
  if (!r.min && !r.max) return "";
  return std::string(r.min_open ? "(" : "[") + (r.min ? number_text(*r.min) : "") + ".." +
         (r.max ? number_text(*r.max) : "") + (r.max_open ? ")" : "]");
}

std::string words_label(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : ",") + w;
  return "{" + out + "}";
}

std::string default_label(const Json& d) {
  if (d.is_null()) return "";
  if (d.is_string()) return d.get<std::string>();
  if (d.is_boolean()) return d.get<bool>() ? "true" : "false";
  if (d.is_array()) {
    std::string out;
    for (const auto& x : d) out += (out.empty() ? "" : ",") + (x.is_string() ? x.get<std::string>() : x.dump());
    return out;
  }
  if (d.is_number()) return number_text(d.get<double>());
  return d.dump();
}

// A validator that only describes (the library checks the value, once, for CLI and HTTP alike).
CLI::Validator describing(const std::string& description) {
  return CLI::Validator([](const std::string&) { return std::string(); }, description);
}

}  // namespace

void add_declared_options(CliCommand& c) {
  auto table = option_table();
  if (!table) return;  // run_command reports the broken declaration; options_test catches it first
  for (const OptionSpec* o : (*table)->of_command(c.row->command)) {
    if (!o->cli || o->type == OptionType::kObject) continue;
    const bool positional = o->positional_in(c.row->command);
    Opt* opt = nullptr;
    switch (o->type) {
      case OptionType::kFlag:
        opt = &c.flag(o->cli_name(), o->help);
        break;
      case OptionType::kList:
        opt = &c.list(o->cli_name(), o->help, positional);
        break;
      case OptionType::kFiles:
        opt = &c.files(o->cli_name(), o->help);
        break;
      default:
        opt = &c.value(o->cli_name(), o->help, positional);
        break;
    }
    if (o->type == OptionType::kFlag) continue;
    CLI::Option* option = opt->option;
    option->type_name(type_label(o->type));
    if (const std::string range = range_label(o->range); !range.empty()) option->check(describing(range));
    if (o->type == OptionType::kEnum || o->type == OptionType::kList) {
      if (auto words = api::option_words(*o); words && !words->empty()) option->check(describing(words_label(*words)));
    }
    if (const std::string d = default_label(o->default_value); !d.empty()) option->default_str(d);
    if (o->required_by(c.row->command)) option->required();
  }
}

}  // namespace gpuplan::cli

#include "cli/cli.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpuplan::cli {

namespace {
// .json files one directory given for a files option may hold (a calibration directory of a fleet has
// one per GPU model and MIG profile; the library takes at most 64 calibration files).
constexpr size_t kMaxDirectoryFiles = 256;

std::string key_of(const std::string& name) {
  std::string k = name;
  std::replace(k.begin(), k.end(), '-', '_');
  return k;
}
}  // namespace

Opt& CliCommand::value(const std::string& name, const std::string& help, bool positional) {
  opts.push_back(Opt{key_of(name), OptKind::kValue, nullptr, {}, {}, false});
  Opt& o = opts.back();
  o.option = app->add_option(positional ? name + ",--" + name : "--" + name, o.value, help);
  return o;
}

Opt& CliCommand::list(const std::string& name, const std::string& help, bool positional) {
  opts.push_back(Opt{key_of(name), OptKind::kList, nullptr, {}, {}, false});
  Opt& o = opts.back();
  o.option = app->add_option(positional ? name + ",--" + name : "--" + name, o.values, help);
  return o;
}

Opt& CliCommand::flag(const std::string& name, const std::string& help) {
  opts.push_back(Opt{key_of(name), OptKind::kFlag, nullptr, {}, {}, false});
  Opt& o = opts.back();
  o.option = app->add_flag("--" + name, o.flag, help);
  return o;
}

Opt& CliCommand::files(const std::string& name, const std::string& help) {
  opts.push_back(Opt{key_of(name), OptKind::kFiles, nullptr, {}, {}, false});
  Opt& o = opts.back();
  o.option = app->add_option("--" + name, o.values, help);
  return o;
}

Result<Json> CliCommand::request() const {
  Json req = Json::object();
  for (const auto& o : opts) {
    if (o.option->count() == 0) continue;
    switch (o.kind) {
      case OptKind::kValue:
        req[o.key] = o.value;
        break;
      case OptKind::kList:
        req[o.key] = o.values;
        break;
      case OptKind::kFlag:
        req[o.key] = o.flag;
        break;
      case OptKind::kFiles: {
        Json files = Json::array();
        // A directory stands for the .json files in it, in name order (a calibration directory).
        std::vector<std::string> paths;
        for (const auto& path : o.values) {
          std::error_code ec;
          if (!std::filesystem::is_directory(path, ec)) {
            paths.push_back(path);
            continue;
          }
          std::vector<std::string> in_dir;
          for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
            if (in_dir.size() >= kMaxDirectoryFiles) {
              return limit_error("--" + o.option->get_name().substr(2) + " directory '" + path + "' has over " +
                                     std::to_string(kMaxDirectoryFiles) + " .json files",
                                 o.key);
            }
            if (entry.is_regular_file(ec) && entry.path().extension() == ".json")
              in_dir.push_back(entry.path().string());
          }
          if (ec) return usage_error("cannot read the directory '" + path + "'; check the path", o.key);
          std::sort(in_dir.begin(), in_dir.end());
          paths.insert(paths.end(), in_dir.begin(), in_dir.end());
        }
        for (const auto& path : paths) {
          std::ifstream in(path, std::ios::binary);
          std::stringstream text;
          text << in.rdbuf();
          if (!in.good() && !in.eof()) {
            return usage_error("cannot read --" + o.option->get_name().substr(2) + " file '" + path + "'", o.key);
          }
          if (!in.is_open()) return usage_error("cannot open file '" + path + "'; check the path", o.key);
          files.push_back(Json{{"name", path}, {"text", text.str()}});
        }
        req[o.key] = std::move(files);
        break;
      }
    }
  }
  return req;
}

std::string fmt_value(const Json& v, int precision) {
  if (v.is_null()) return "-";
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number()) {
    const double d = v.get<double>();
    char buf[64];
    if (d != 0 && (std::fabs(d) >= 1e6 || std::fabs(d) < 1e-3)) {
      std::snprintf(buf, sizeof buf, "%.*g", precision, d);
    } else {
      std::snprintf(buf, sizeof buf, "%.*g", std::max(precision, static_cast<int>(std::log10(std::fabs(d) + 1)) + 1),
                    d);
    }
    return buf;
  }
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

namespace {
// Display width in terminal columns: count UTF-8 lead bytes only.
size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}
}  // namespace

std::string render_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                         const std::vector<bool>& right_align) {
  std::vector<size_t> width(header.size(), 0);
  for (size_t c = 0; c < header.size(); ++c) width[c] = display_width(header[c]);
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size() && c < width.size(); ++c) width[c] = std::max(width[c], display_width(r[c]));
  }
  std::ostringstream os;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      const size_t pad = width[c] - display_width(cell);
      const bool right = c < right_align.size() && right_align[c];
      if (right)
        out += std::string(pad, ' ') + cell;
      else
        out += cell + (c + 1 < width.size() ? std::string(pad, ' ') : "");
      if (c + 1 < width.size()) out += "  ";
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    os << out << "\n";
  };
  line(header);
  std::vector<std::string> rule;
  rule.reserve(width.size());
  for (size_t w : width) rule.emplace_back(w, '-');
  line(rule);
  for (const auto& r : rows) line(r);
  return os.str();
}

std::string render_csv(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  auto cell = [](const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  std::ostringstream os;
  for (size_t i = 0; i < header.size(); ++i) os << (i ? "," : "") << cell(header[i]);
  os << "\n";
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) os << (i ? "," : "") << cell(r[i]);
    os << "\n";
  }
  return os.str();
}

std::string reason_lines(const Json& targets, bool refused_only) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;  // reason, targets
  for (const auto& t : targets) {
    if (!t.contains("reason") || !t["reason"].is_string() || (refused_only && !t.contains("refusal"))) continue;
    const std::string reason = t["reason"].get<std::string>();
    std::string name = t["target"].get<std::string>();
    if (t["count"].get<int>() > 1) name += " x" + std::to_string(t["count"].get<int>());
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == reason; });
    if (g == groups.end()) g = groups.insert(groups.end(), {reason, {}});
    if (std::find(g->second.begin(), g->second.end(), name) == g->second.end()) g->second.push_back(name);
  }
  std::string out;
  for (const auto& [reason, names] : groups) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    out += "  ";
    out += list;
    out += ": ";
    out += reason;
    out += "\n";
  }
  return out;
}

}  // namespace gpuplan::cli

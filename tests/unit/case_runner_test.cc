// The data-driven case runner (like duckdb's sqllogictests): every tests/cases/**/*.yaml holds
//   cases:
//     - name: ...
//       command: fit                 # a run_command name
//       request: {...}               # the request object
//       expect: {...}                # subset match against the result JSON
//       error: {code: not_found, message_contains: "..."}   # or: the expected error
// Matchers inside `expect`: {$approx: x, $rel: 0.01}, {$ge: x}, {$le: x}, {$contains: "text" or item},
// {$len: n}. Objects match when every expected key matches; arrays element by element.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>

#include "catalog/yaml_util.h"
#include "gpuplan/api.h"

namespace gpuplan {
namespace {

namespace fs = std::filesystem;

// Returns an empty string when `actual` matches `expected`, else where and why not.
std::string match(const Json& expected, const Json& actual, const std::string& path) {
  if (expected.is_object() && !expected.empty() && expected.begin().key().rfind('$', 0) == 0) {
    for (auto it = expected.begin(); it != expected.end(); ++it) {
      const std::string& op = it.key();
      const Json& v = it.value();
      if (op == "$approx") {
        const double rel = expected.value("$rel", 1e-6);
        if (!actual.is_number()) return path + ": expected a number, got " + actual.dump();
        const double a = actual.get<double>(), e = v.get<double>();
        if (std::fabs(a - e) > rel * std::max(std::fabs(e), 1e-12)) {
          return path + ": " + actual.dump() + " is not within " + std::to_string(rel * 100) + "% of " + v.dump();
        }
      } else if (op == "$rel") {
        continue;
      } else if (op == "$ge" || op == "$le") {
        if (!actual.is_number()) return path + ": expected a number, got " + actual.dump();
        const double a = actual.get<double>(), e = v.get<double>();
        if ((op == "$ge" && a < e) || (op == "$le" && a > e))
          return path + ": " + actual.dump() + " fails " + op + " " + v.dump();
      } else if (op == "$len") {
        if (!actual.is_array() && !actual.is_object()) return path + ": expected a list";
        if (actual.size() != v.get<size_t>())
          return path + ": length " + std::to_string(actual.size()) + " != " + v.dump();
      } else if (op == "$contains") {
        if (actual.is_string()) {
          if (actual.get<std::string>().find(v.get<std::string>()) == std::string::npos) {
            return path + ": " + actual.dump() + " does not contain " + v.dump();
          }
        } else if (actual.is_array()) {
          bool found = false;
          for (const auto& item : actual) found = found || match(v, item, path).empty();
          if (!found) return path + ": no element matches " + v.dump();
        } else {
          return path + ": $contains needs a string or a list";
        }
      } else {
        return path + ": unknown matcher " + op;
      }
    }
    return {};
  }
  if (expected.is_object()) {
    if (!actual.is_object()) return path + ": expected an object, got " + actual.dump().substr(0, 200);
    for (auto it = expected.begin(); it != expected.end(); ++it) {
      if (!actual.contains(it.key())) return path + "." + it.key() + ": missing";
      if (auto m = match(it.value(), actual.at(it.key()), path + "." + it.key()); !m.empty()) return m;
    }
    return {};
  }
  if (expected.is_array()) {
    if (!actual.is_array()) return path + ": expected a list, got " + actual.dump().substr(0, 200);
    if (actual.size() != expected.size()) {
      return path + ": expected " + std::to_string(expected.size()) + " elements, got " + std::to_string(actual.size());
    }
    for (size_t i = 0; i < expected.size(); ++i) {
      if (auto m = match(expected[i], actual[i], path + "[" + std::to_string(i) + "]"); !m.empty()) return m;
    }
    return {};
  }
  if (expected.is_number() && actual.is_number()) {
    const double a = actual.get<double>(), e = expected.get<double>();
    return std::fabs(a - e) <= 1e-9 * std::max(1.0, std::fabs(e))
               ? ""
               : path + ": " + actual.dump() + " != " + expected.dump();
  }
  return expected == actual ? "" : path + ": " + actual.dump().substr(0, 200) + " != " + expected.dump();
}

// The runner is strict, so that a case cannot pass by not being read: a file it cannot parse, a key
// it does not know (a misspelled `expects:`), a matcher it does not know, or a case without exactly
// one of `expect` and `error` fails as a test of its own.
constexpr std::string_view kFileKeys[] = {"cases"};
constexpr std::string_view kCaseKeys[] = {"name", "command", "request", "expect", "error"};
constexpr std::string_view kErrorKeys[] = {"code", "message_contains", "field"};
constexpr std::string_view kMatchers[] = {"$approx", "$rel", "$ge", "$le", "$contains", "$len"};

template <size_t N>
bool known(const std::string& key, const std::string_view (&keys)[N]) {
  return std::find(std::begin(keys), std::end(keys), key) != std::end(keys);
}

template <size_t N>
std::string unknown_keys(const Json& obj, const std::string_view (&keys)[N], const std::string& where) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (!known(it.key(), keys)) {
      std::string list;
      for (std::string_view k : keys) list += (list.empty() ? "" : ", ") + std::string(k);
      return where + ": unknown key '" + it.key() + "' (known: " + list + ")";
    }
  }
  return {};
}

// Checks the matchers inside an `expect` tree; empty when every one is known and well-formed.
std::string check_expect(const Json& e, const std::string& path) {
  if (e.is_object()) {
    bool any_op = false, any_plain = false;
    for (auto it = e.begin(); it != e.end(); ++it) (it.key().rfind('$', 0) == 0 ? any_op : any_plain) = true;
    if (any_op && any_plain) return path + ": matchers ($...) and plain keys mixed in one object";
    if (any_op) {
      for (auto it = e.begin(); it != e.end(); ++it) {
        const std::string& op = it.key();
        if (!known(op, kMatchers)) return path + ": unknown matcher " + op;
        const Json& v = it.value();
        if ((op == "$approx" || op == "$rel" || op == "$ge" || op == "$le") && !v.is_number())
          return path + ": " + op + " needs a number";
        if (op == "$len" && !(v.is_number_integer() && v.get<long long>() >= 0))
          return path + ": $len needs a whole number >= 0";
        if (op == "$rel" && !e.contains("$approx")) return path + ": $rel only goes with $approx";
        if (op == "$contains") {
          if (auto m = check_expect(v, path + ".$contains"); !m.empty()) return m;
        }
      }
      return {};
    }
    for (auto it = e.begin(); it != e.end(); ++it) {
      if (auto m = check_expect(it.value(), path + "." + it.key()); !m.empty()) return m;
    }
    return {};
  }
  if (e.is_array()) {
    for (size_t i = 0; i < e.size(); ++i) {
      if (auto m = check_expect(e[i], path + "[" + std::to_string(i) + "]"); !m.empty()) return m;
    }
  }
  return {};
}

// The cases of one case file, or what is wrong with it (the first problem).
Result<std::vector<Json>> load_cases(const std::string& file, std::string_view text) {
  auto node = yaml::parse(file, text);
  if (!node) return node.error();
  auto doc = yaml::to_json(*node, file);
  if (!doc) return doc.error();
  auto bad = [&](const std::string& m) { return invalid_data_error(file + ": " + m, file); };
  if (!doc->is_object()) return bad("expected a mapping with `cases:`");
  if (auto m = unknown_keys(*doc, kFileKeys, "top level"); !m.empty()) return bad(m);
  if (!doc->contains("cases") || !(*doc)["cases"].is_array() || (*doc)["cases"].empty())
    return bad("expected a non-empty list under `cases:`");
  std::vector<Json> out;
  std::set<std::string> names;
  for (size_t i = 0; i < (*doc)["cases"].size(); ++i) {
    const Json& c = (*doc)["cases"][i];
    std::string where = "cases[" + std::to_string(i) + "]";
    if (!c.is_object()) return bad(where + ": expected a mapping");
    if (c.contains("name") && c["name"].is_string()) where += " (" + c["name"].get<std::string>() + ")";
    if (auto m = unknown_keys(c, kCaseKeys, where); !m.empty()) return bad(m);
    if (!c.contains("name") || !c["name"].is_string() || c["name"].get<std::string>().empty())
      return bad(where + ": needs a `name`");
    if (!names.insert(c["name"].get<std::string>()).second) return bad(where + ": duplicate name");
    if (!c.contains("command") || !c["command"].is_string() || c["command"].get<std::string>().empty())
      return bad(where + ": needs a `command`");
    if (c.contains("request") && !c["request"].is_object()) return bad(where + ": `request` must be a mapping");
    if (c.contains("expect") == c.contains("error")) return bad(where + ": needs exactly one of `expect` and `error`");
    if (c.contains("error")) {
      const Json& e = c["error"];
      if (!e.is_object() || e.empty()) return bad(where + ": `error` needs code, message_contains or field");
      if (auto m = unknown_keys(e, kErrorKeys, where + ".error"); !m.empty()) return bad(m);
      for (auto it = e.begin(); it != e.end(); ++it) {
        if (!it.value().is_string()) return bad(where + ".error." + it.key() + ": expected a string");
      }
    }
    if (c.contains("expect")) {
      if (auto m = check_expect(c["expect"], where + ".expect"); !m.empty()) return bad(m);
    }
    out.push_back(c);
  }
  return out;
}

Result<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return invalid_data_error("cannot read " + path.string(), path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class FailingTest : public testing::Test {
 public:
  explicit FailingTest(std::string message) : message_(std::move(message)) {}
  void TestBody() override { FAIL() << message_; }

 private:
  std::string message_;
};

class CaseTest : public testing::Test {
 public:
  CaseTest(Json c, std::string file) : case_(std::move(c)), file_(std::move(file)) {}
  void TestBody() override {
    Context ctx{Catalog::embedded()};
    auto result = run_command(ctx, case_.value("command", ""), case_.value("request", Json::object()));
    if (case_.contains("error")) {
      ASSERT_FALSE(result.ok()) << file_ << ": expected an error, got " << result->dump().substr(0, 400);
      const Json& e = case_["error"];
      if (e.contains("code"))
        EXPECT_EQ(error_code_name(result.error().code), e["code"].get<std::string>()) << result.error().message;
      if (e.contains("message_contains")) {
        EXPECT_NE(result.error().message.find(e["message_contains"].get<std::string>()), std::string::npos)
            << result.error().message;
      }
      if (e.contains("field")) EXPECT_EQ(result.error().field, e["field"].get<std::string>());
      return;
    }
    ASSERT_TRUE(result.ok()) << file_ << ": " << result.error().message;
    if (case_.contains("expect")) {
      const std::string m = match(case_["expect"], *result, "result");
      EXPECT_TRUE(m.empty()) << file_ << ": " << m;
    }
  }

 private:
  Json case_;
  std::string file_;
};

std::string test_name(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

int register_cases() {
  const fs::path root = fs::path(GPUPLAN_SOURCE_DIR) / "tests" / "cases";
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator(); ++it) {
    if (it->path().extension() == ".yaml" || it->path().extension() == ".yml") files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  int n = 0;
  for (const auto& f : files) {
    const std::string rel = fs::relative(f, root).generic_string();
    auto text = read_text(f);
    auto cases = text ? load_cases(rel, *text) : Result<std::vector<Json>>(text.error());
    if (!cases) {
      testing::RegisterTest("Cases", test_name(rel + "/unreadable_case_file").c_str(), nullptr, nullptr, __FILE__,
                            __LINE__,
                            [msg = cases.error().message]() -> testing::Test* { return new FailingTest(msg); });
      continue;
    }
    for (const auto& c : *cases) {
      const std::string name = test_name(rel + "/" + c["name"].get<std::string>());
      testing::RegisterTest("Cases", name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [c, rel]() -> testing::Test* { return new CaseTest(c, rel); });
      ++n;
    }
  }
  return n;
}

const int kRegistered = register_cases();

TEST(Cases, AtLeastOneCaseIsRegistered) { EXPECT_GT(kRegistered, 0); }

// The runner itself: a case file with a typo'd key, or any other problem, is refused, never passed.
TEST(CaseRunner, TypoedExpectKeyFails) {
  const fs::path bad = fs::path(GPUPLAN_SOURCE_DIR) / "tests" / "fixtures" / "case_runner" / "typo_expect.yaml";
  auto text = read_text(bad);
  ASSERT_TRUE(text.ok()) << text.error().message;
  auto cases = load_cases("typo_expect.yaml", *text);
  ASSERT_FALSE(cases.ok()) << "a case with `expects:` was accepted";
  EXPECT_NE(cases.error().message.find("unknown key 'expects'"), std::string::npos) << cases.error().message;
}

TEST(CaseRunner, RefusesWhatItCannotCheck) {
  struct Bad {
    const char* text;
    const char* says;
  };
  const Bad bad[] = {
      {"cases: [{name: a, command: fit, request: {}, expect: {x: 1}}", "not valid YAML"},
      {"case: [{name: a, command: fit, expect: {}}]", "unknown key 'case'"},
      {"cases: []", "non-empty list"},
      {"cases: [{name: a, command: fit}]", "exactly one of"},
      {"cases: [{name: a, command: fit, expect: {}, error: {code: usage}}]", "exactly one of"},
      {"cases: [{name: a, expect: {}}]", "needs a `command`"},
      {"cases: [{command: fit, expect: {}}]", "needs a `name`"},
      {"cases: [{name: a, command: fit, expect: {}}, {name: a, command: fit, expect: {}}]", "duplicate name"},
      {"cases: [{name: a, command: fit, expect: {x: {$aprox: 1}}}]", "unknown matcher $aprox"},
      {"cases: [{name: a, command: fit, expect: {x: [{$contains: {$lenn: 1}}]}}]", "unknown matcher $lenn"},
      {"cases: [{name: a, command: fit, expect: {x: {$approx: 1, y: 2}}}]", "mixed"},
      {"cases: [{name: a, command: fit, expect: {x: {$len: -1}}}]", "$len needs"},
      {"cases: [{name: a, command: fit, expect: {x: {$rel: 0.1}}}]", "$rel only goes with $approx"},
      {"cases: [{name: a, command: fit, error: {code: usage, mesage_contains: x}}]", "unknown key 'mesage_contains'"},
      {"cases: [{name: a, command: fit, error: {}}]", "`error` needs"},
  };
  for (const auto& b : bad) {
    auto cases = load_cases("t.yaml", b.text);
    ASSERT_FALSE(cases.ok()) << b.text;
    EXPECT_NE(cases.error().message.find(b.says), std::string::npos) << b.text << " -> " << cases.error().message;
  }
  auto good =
      load_cases("t.yaml", "cases: [{name: a, command: fit, request: {}, expect: {x: {$approx: 1, $rel: 0.1}}}]");
  EXPECT_TRUE(good.ok()) << good.error().message;
}

}  // namespace
}  // namespace gpuplan

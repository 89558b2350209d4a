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
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

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
    if (it->path().extension() == ".yaml") files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  int n = 0;
  for (const auto& f : files) {
    const std::string rel = fs::relative(f, root).generic_string();
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    Json doc;
    try {
      doc = yaml::to_json(YAML::Load(ss.str()));
    } catch (const YAML::Exception& e) {
      testing::RegisterTest("Cases", test_name(rel).c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [rel, msg = std::string(e.what())]() -> testing::Test* {
                              return new CaseTest(Json{{"command", ""}, {"error", Json::object()}}, rel + ": " + msg);
                            });
      continue;
    }
    for (const auto& c : doc.value("cases", Json::array())) {
      const std::string name = test_name(rel + "/" + c.value("name", std::to_string(n)));
      testing::RegisterTest("Cases", name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [c, rel]() -> testing::Test* { return new CaseTest(c, rel); });
      ++n;
    }
  }
  return n;
}

const int kRegistered = register_cases();

TEST(Cases, AtLeastOneCaseIsRegistered) { EXPECT_GT(kRegistered, 0); }

}  // namespace
}  // namespace gpuplan

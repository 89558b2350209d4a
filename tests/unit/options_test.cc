// The option declaration (data/options.yaml): it validates, every name it uses exists, bad
// declarations are refused with the line, the request reader checks values by it, and
// web/openapi.json's request schemas are the ones it generates.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "api/offer_request.h"
#include "api/vocabulary.h"
#include "core/request.h"
#include "gpuplan/api.h"
#include "gpuplan/catalog.h"
#include "gpuplan/embedded.h"
#include "gpuplan/options.h"
#include "gpuplan/plan.h"
#include "gpuplan/workload.h"

namespace gpuplan {
namespace {

const OptionTable& table() {
  auto t = option_table();
  EXPECT_TRUE(t.ok()) << (t ? "" : t.error().message);
  static OptionTable empty;
  return t ? **t : empty;
}

TEST(Options, TheEmbeddedDeclarationValidates) {
  auto t = option_table();
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_GT((*t)->all().size(), 40u);
}

// Every declared command is a library command, or one of the market's HTTP bodies (an operationId of
// web/openapi.json marked x-gpuplan-market, with '.' for '_'), or the items of a declared list of
// objects (market.add.node.gpu).
TEST(Options, EveryDeclaredCommandIsALibraryCommand) {
  const auto names = command_names();
  std::set<std::string> market_operations, item_commands;
  std::ifstream in(std::string(GPUPLAN_SOURCE_DIR) + "/web/openapi.json");
  std::stringstream text;
  text << in.rdbuf();
  const Json doc = Json::parse(text.str(), nullptr, false);
  ASSERT_TRUE(doc.is_object());
  for (const auto& [path, item] : doc["paths"].items()) {
    for (const auto& [method, op] : item.items()) {
      if (!op.is_object() || !op.value("x-gpuplan-market", false)) continue;
      std::string id = op.value("operationId", "");
      std::replace(id.begin(), id.end(), '_', '.');
      market_operations.insert(id);
    }
  }
  for (const auto& o : table().all()) {
    if (!o.items.empty()) item_commands.insert(o.items);
  }
  for (const auto& c : table().commands()) {
    const bool library = std::find(names.begin(), names.end(), c) != names.end();
    EXPECT_TRUE(library || market_operations.count(c) || item_commands.count(c))
        << "data/options.yaml names '" << c << "'";
    // The market's bodies are read strictly and ignore other keys; the library's commands are neither.
    EXPECT_EQ(table().strict(c), !library) << c;
    EXPECT_EQ(table().open(c), !library) << c;
  }
}

TEST(Options, EveryVocabularyAnOptionNamesExists) {
  for (const auto& o : table().all()) {
    if (o.vocabulary.empty()) continue;
    auto words = api::vocabulary_names(o.vocabulary);
    ASSERT_TRUE(words.ok()) << o.name << ": " << words.error().message;
    EXPECT_FALSE(words->empty()) << o.name;
  }
}

// Every key a command reads is declared for it: a request with only that key is never refused as
// unknown (the four hand-rolled key lists this replaces each had its own gaps).
TEST(Options, EveryCommandAcceptsItsDeclaredKeysAndRefusesOthers) {
  for (const auto& c : table().commands()) {
    for (const OptionSpec* o : table().of_command(c)) {
      Json req{{o->name, nullptr}};
      EXPECT_TRUE(Request(req, c).check_keys().ok()) << c << " " << o->name;
    }
    auto refused = Request(Json{{"no_such_key", 1}}, c).check_keys();
    if (table().open(c)) {  // the market's bodies: other keys are ignored (issue #13)
      EXPECT_TRUE(refused.ok()) << c;
      EXPECT_FALSE(Request(Json::array(), c).check_keys().ok()) << c;
      continue;
    }
    ASSERT_FALSE(refused.ok()) << c;
    EXPECT_EQ(refused.error().field, "no_such_key");
    EXPECT_NE(refused.error().message.find(c + " takes"), std::string::npos) << refused.error().message;
  }
}

// One default (issue #12): plan.h said 64 instances per offer and the plan command 16.
TEST(Options, MaxInstancesHasOneDefault) {
  const OptionSpec* o = table().find("max_instances", "plan");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->default_value, 16);
  EXPECT_EQ(o->default_value, PlanOptions{}.max_instances);
  const OptionSpec* age = table().find("max_age", "offers.list");
  ASSERT_NE(age, nullptr);
  EXPECT_EQ(age->default_value.get<double>(), api::kDefaultMaxOfferAgeDays);
}

Result<OptionTable> parse(const std::string& options) {
  return OptionTable::parse("test.yaml", "groups:\n  workload: [fit]\noptions:\n" + options);
}

TEST(Options, BadDeclarationsAreRefusedWithTheirLine) {
  struct Bad {
    const char* yaml;
    const char* says;
  };
  const Bad bad[] = {
      {"  - {name: a, type: integer, commands: [fit], help: x}\n", "unknown type"},
      {"  - {name: a, type: int, commands: [fit]}\n", "help"},
      {"  - {name: a, type: int, help: x}\n", "which commands"},
      {"  - {name: a, type: int, group: nope, help: x}\n", "unknown group"},
      {"  - {name: a, type: int, range: \"[1, x]\", commands: [fit], help: x}\n", "is not a range"},
      {"  - {name: a, type: int, range: \"[5, 1]\", commands: [fit], help: x}\n", "is not a range"},
      {"  - {name: a, type: int, range: \"[1, 10]\", default: 0, commands: [fit], help: x}\n", "outside the range"},
      {"  - {name: a, type: int, default: yes, commands: [fit], help: x}\n", "not a value of type"},
      {"  - {name: a, type: enum, commands: [fit], help: x}\n", "needs its vocabulary"},
      {"  - {name: a, type: enum, values: [p, q], default: r, commands: [fit], help: x}\n", "not one of its values"},
      {"  - {name: a, type: string, range: \"[1, 2]\", commands: [fit], help: x}\n", "only int and number"},
      {"  - {name: A-b, type: int, commands: [fit], help: x}\n", "snake_case"},
      {"  - {name: a, type: int, commands: [fit], help: x, colour: red}\n", "colour"},
      {"  - {name: a, type: int, commands: [fit], required: [perf], help: x}\n", "not one of its commands"},
      {"  - {name: a, type: int, commands: [fit], help: x}\n  - {name: a, type: int, group: workload, help: y}\n",
       "declared twice"},
  };
  for (const auto& b : bad) {
    auto t = parse(b.yaml);
    ASSERT_FALSE(t.ok()) << b.yaml;
    EXPECT_NE(t.error().message.find(b.says), std::string::npos) << b.yaml << " -> " << t.error().message;
    EXPECT_NE(t.error().message.find("test.yaml:"), std::string::npos) << t.error().message;
  }
  // Strict reading: bounds on text and lists, the commands named, the items' command declared.
  const Bad strict[] = {
      {"strict: [fit]\noptions:\n  - {name: a, type: string, commands: [fit], help: x}\n", "need a max_length"},
      {"strict: [fit]\noptions:\n  - {name: a, type: list, max_length: 8, commands: [fit], help: x}\n",
       "need a max_items"},
      {"strict: [nope]\noptions:\n  - {name: a, type: int, commands: [fit], help: x}\n", "not a command"},
      {"open: [nope]\noptions:\n  - {name: a, type: int, commands: [fit], help: x}\n", "not a command"},
      {"options:\n  - {name: a, type: int, max_length: 8, commands: [fit], help: x}\n", "only string, enum"},
      {"options:\n  - {name: a, type: string, max_items: 8, commands: [fit], help: x}\n", "only list"},
      {"options:\n  - {name: a, type: string, items: fit, commands: [fit], help: x}\n", "only list"},
      {"options:\n  - {name: a, type: list, items: nope, commands: [fit], help: x}\n", "not a command"},
      {"options:\n  - {name: a, type: list, max_length: 0, commands: [fit], help: x}\n", "between"},
  };
  for (const auto& b : strict) {
    auto t = OptionTable::parse("test.yaml", b.yaml);
    ASSERT_FALSE(t.ok()) << b.yaml;
    EXPECT_NE(t.error().message.find(b.says), std::string::npos) << b.yaml << " -> " << t.error().message;
    EXPECT_NE(t.error().message.find("test.yaml:"), std::string::npos) << t.error().message;
  }
}

TEST(Options, RangesReadAndPrint) {
  auto t = parse(
      "  - {name: a, type: number, range: \"(0, 1]\", commands: [fit], help: x}\n"
      "  - {name: b, type: int, range: \"[0, ..)\", commands: [fit], help: x}\n");
  ASSERT_TRUE(t.ok()) << t.error().message;
  const OptionRange& a = t->find("a")->range;
  EXPECT_FALSE(a.contains(0));
  EXPECT_TRUE(a.contains(1));
  EXPECT_FALSE(a.contains(1.5));
  EXPECT_EQ(a.text(), "(0, 1]");
  EXPECT_EQ(a.words(), "above 0 and at most 1");
  EXPECT_EQ(t->find("b")->range.text(), "[0, ..)");
  EXPECT_TRUE(t->find("b")->range.contains(1e18));
}

// The reader checks type, range and allowed words by the declaration; the error names the field and
// the range.
TEST(Options, TheReaderChecksByTheDeclaration) {
  auto tp = Request(Json{{"tp", 2000}}, "fit").whole("tp");
  ASSERT_FALSE(tp.ok());
  EXPECT_EQ(tp.error().field, "tp");
  EXPECT_NE(tp.error().message.find("[1, 1024]"), std::string::npos) << tp.error().message;
  EXPECT_EQ(*Request(Json::object(), "fit").whole("tp"), 1);  // the declared default
  EXPECT_FALSE(Request(Json{{"tp", 1.5}}, "fit").whole("tp").ok());
  EXPECT_FALSE(Request(Json{{"gpu_memory_utilization", 0}}, "fit").real("gpu_memory_utilization").ok());
  EXPECT_EQ(**Request(Json{{"gpu_memory_utilization", "1"}}, "fit").real("gpu_memory_utilization"), 1.0);
  auto objective = Request(Json{{"objective", "fast"}}, "plan").text("objective");
  ASSERT_FALSE(objective.ok());
  EXPECT_NE(objective.error().message.find("cost, time"), std::string::npos);
  EXPECT_EQ(*Request(Json{{"objective", ""}}, "plan").text("objective"), "cost");
  auto undeclared = Request(Json::object(), "fit").whole("no_such_option");
  ASSERT_FALSE(undeclared.ok());
  EXPECT_EQ(undeclared.error().code, ErrorCode::kInternal);
}

// A strict command (the market's bodies) reads JSON types only, bounds its strings, refuses absent
// required keys and has no fallback declaration; the planner's commands read as before.
TEST(Options, AStrictCommandReadsJsonTypesOnly) {
  auto t = OptionTable::parse("test.yaml",
                              "strict: [s]\nopen: [s]\noptions:\n"
                              "  - {name: n, type: int, range: \"[1, 64]\", default: 1, commands: [s], help: x}\n"
                              "  - {name: r, type: number, commands: [s], required: [s], help: x}\n"
                              "  - {name: w, type: string, max_length: 4, commands: [s], help: x}\n"
                              "  - {name: b, type: bool, commands: [s], help: x}\n"
                              "  - {name: l, type: list, max_length: 2, max_items: 2, commands: [s], help: x}\n");
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_TRUE(t->strict("s"));
  EXPECT_TRUE(t->open("s"));
  EXPECT_FALSE(t->strict("fit"));
  // The embedded declaration's market bodies read this way.
  auto count = Request(Json{{"count", "3"}}, "market.rent").whole("count");
  ASSERT_FALSE(count.ok());
  EXPECT_EQ(count.error().field, "count");
  EXPECT_NE(count.error().message.find("without quotes"), std::string::npos) << count.error().message;
  EXPECT_FALSE(Request(Json{{"count", 2.0}}, "market.rent").whole("count").ok());
  EXPECT_EQ(*Request(Json{{"count", 2}}, "market.rent").whole("count"), 2);
  EXPECT_EQ(*Request(Json{{"count", nullptr}}, "market.rent").whole("count"), 1);  // null is absent
  auto over = Request(Json{{"count", 65}}, "market.rent").whole("count");
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.error().message.find("[1, 64]"), std::string::npos) << over.error().message;
  auto huge = Request(Json{{"count", 18446744073709551615ULL}}, "market.rent").whole("count");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().field, "count");
  EXPECT_EQ(**Request(Json{{"hours", 2}}, "market.rent").real("hours"), 2.0);
  EXPECT_FALSE(Request(Json{{"hours", "2"}}, "market.rent").real("hours").ok());
  EXPECT_FALSE(Request(Json{{"offer", 12}}, "market.rent").text("offer").ok());
  EXPECT_EQ(*Request(Json{{"offer", ""}}, "market.rent").text("offer"), "");  // "" is not the default
  EXPECT_EQ(*Request(Json::object(), "market.create.tenant").text("kind"), "renter");
  auto required = Request(Json::object(), "market.create.tenant").text("name");
  ASSERT_FALSE(required.ok());
  EXPECT_EQ(required.error().field, "name");
  EXPECT_NE(required.error().message.find("'name' is required"), std::string::npos) << required.error().message;
  // No other command's declaration stands in for an undeclared key.
  auto undeclared = Request(Json{{"batch", 1}}, "market.rent").whole("batch");
  ASSERT_FALSE(undeclared.ok());
  EXPECT_EQ(undeclared.error().code, ErrorCode::kInternal);
  // Lists of objects: each item a request of the items' command, the list bounded.
  const Json node{{"gpus", Json::array({Json{{"target", "a"}, {"uuid", "u"}}})}};  // the items refer into it
  auto gpus = Request(node, "market.add.node").objects("gpus");
  ASSERT_TRUE(gpus.ok()) << gpus.error().message;
  ASSERT_EQ(gpus->size(), 1u);
  EXPECT_EQ(*(*gpus)[0].text("uuid"), "u");
  EXPECT_EQ(*(*gpus)[0].text("mig"), "none");
  auto not_object = Request(Json{{"gpus", Json::array({1})}}, "market.add.node").objects("gpus");
  ASSERT_FALSE(not_object.ok());
  EXPECT_EQ(not_object.error().field, "gpus[0]");
  EXPECT_FALSE(Request(Json{{"gpus", "a100"}}, "market.add.node").objects("gpus").ok());
  // The planner's commands still read form text as numbers and "a,b" as a list.
  EXPECT_EQ(*Request(Json{{"tp", "2"}}, "fit").whole("tp"), 2);
  EXPECT_EQ(Request(Json{{"lora_targets", "q,k"}}, "fit").words("lora_targets")->size(), 2u);
  EXPECT_EQ(*Request(Json{{"objective", ""}}, "plan").text("objective"), "cost");
}

// micro_batch and seq_len (validation rows' training spellings) are read in one place: the workload.
TEST(Options, MicroBatchAndSeqLenAreTheWorkloadsBatchAndContext) {
  auto w = parse_workload(Json{{"model", "llama-2-7b"}, {"task", "lora"}, {"micro_batch", 3}, {"seq_len", 2048}});
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(w->batch, 3);
  EXPECT_EQ(w->context, 2048);
}

// The vocabulary endpoint lists every option and every vocabulary; enum options carry their words.
TEST(Options, TheVocabularyCommandListsOptionsAndNames) {
  Context ctx{Catalog::embedded()};
  auto r = run_command(ctx, "vocabulary", Json::object());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)["options"].size(), table().all().size());
  for (const char* v : {"task", "weights", "kv_cache", "engine", "optimizer", "checkpointing", "amp", "lora_targets"}) {
    EXPECT_FALSE((*r)["vocabularies"][v].empty()) << v;
  }
  EXPECT_FALSE((*r)["mig_profiles"]["a100-40gb-sxm4"].empty());
  EXPECT_FALSE((*r)["models"].empty());
  EXPECT_FALSE(run_command(ctx, "vocabulary", Json{{"x", 1}}).ok());
  // An option's own word list never replaces the vocabulary of its name: the node's mig_policy option
  // (static, dynamic) left the page's GPU MIG select without "none".
  EXPECT_EQ((*r)["vocabularies"]["mig_policy"], Json::array({"none", "static", "dynamic"}));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// web/openapi.json's request bodies and query parameters are generated from the declaration. When
// this fails, regenerate the file: GPUPLAN_UPDATE_OPENAPI=1 ./build/tests/gpuplan_tests
// --gtest_filter=Options.OpenApiRequestSchemasAreGenerated
TEST(Options, OpenApiRequestSchemasAreGenerated) {
  const std::string path = std::string(GPUPLAN_SOURCE_DIR) + "/web/openapi.json";
  const Json doc = Json::parse(read_text(path), nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << path;
  auto generated = api::openapi_with_declared_requests(doc);
  ASSERT_TRUE(generated.ok()) << generated.error().message;
  if (const char* update = std::getenv("GPUPLAN_UPDATE_OPENAPI"); update && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << generated->dump(1) << "\n";  // the file's one-space indent
    return;
  }
  // The JSON Patch from the file to the generated document: empty when the file is up to date.
  const Json patch = Json::diff(doc, *generated);
  std::string paths;
  for (size_t i = 0; i < patch.size() && i < 10; ++i) paths += "\n  " + patch[i]["path"].get<std::string>();
  EXPECT_TRUE(patch.empty()) << "web/openapi.json is stale: " << patch.size()
                             << " differences from data/options.yaml, first:" << paths
                             << "\nrun GPUPLAN_UPDATE_OPENAPI=1 ./build/tests/gpuplan_tests "
                                "--gtest_filter=Options.OpenApiRequestSchemasAreGenerated";
}

}  // namespace
}  // namespace gpuplan

namespace gpuplan {
namespace {

// The string literals of a JavaScript file ('...', "...", `...` without ${}), roughly: enough to find a
// name written as a value.
std::vector<std::string> js_literals(std::string_view text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size(); ++i) {
    const char q = text[i];
    if (q == '/' && i + 1 < text.size() && text[i + 1] == '/') {  // a line comment
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    if (q != '\'' && q != '"' && q != '`') continue;
    std::string lit;
    size_t j = i + 1;
    for (; j < text.size() && text[j] != q && text[j] != '\n'; ++j) {
      if (text[j] == '\\' && j + 1 < text.size()) ++j;
      lit += text[j];
    }
    out.push_back(lit);
    i = j;
  }
  return out;
}

// The page hard-codes no format, engine, task or MIG profile name: it fills its lists from GET
// /api/v1/vocabulary; the MIG builder (web/mig.js) parses layouts through mig.check and lists the
// profiles GET /api/v1/mig/{gpu}/profiles gives.
TEST(Options, ThePageHardCodesNoVocabularyName) {
  Context ctx{Catalog::embedded()};
  auto v = run_command(ctx, "vocabulary", Json::object());
  ASSERT_TRUE(v.ok()) << v.error().message;
  std::set<std::string> names;
  for (const char* vocab : {"task", "weights", "kv_cache", "engine"}) {
    for (const auto& n : (*v)["vocabularies"][vocab]) names.insert(n.get<std::string>());
  }
  for (const auto& [gpu, profiles] : (*v)["mig_profiles"].items()) {
    for (const auto& p : profiles) names.insert(p.get<std::string>());
  }
  ASSERT_GT(names.size(), 30u);
  int files = 0;
  for (const auto& f : embedded_files()) {
    const std::string_view path = f.path;
    if (path.rfind("web/", 0) != 0 || path.size() < 3 || path.substr(path.size() - 3) != ".js") continue;
    ++files;
    for (const auto& lit : js_literals(f.contents)) {
      EXPECT_EQ(names.count(lit), 0u) << path << " hard-codes '" << lit
                                      << "': read it from GET /api/v1/vocabulary (ui.js vocabulary())";
    }
  }
  EXPECT_GE(files, 5);
}

TEST(Options, TheLiteralScannerFindsNames) {
  const auto lits = js_literals("const a = ['bf16', \"vllm\"]; // 'not-this'\nx(`qlora`, 'it\\'s');");
  EXPECT_EQ(lits, (std::vector<std::string>{"bf16", "vllm", "qlora", "it's"}));
}

}  // namespace
}  // namespace gpuplan

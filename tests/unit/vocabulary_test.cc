// One vocabulary per concept (vocabulary.h): every word the library's tables list (the lists `fit
// --help`, the API and the page show) means the same in fit, perf, plan, compare and a `mig pack`
// workload: each command answers, or all refuse it with the same reason. The test iterates the tables;
// it names no engine, format or task.
#include "gpuplan/vocabulary.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "gpuplan/api.h"
#include "gpuplan/catalog.h"
#include "gpuplan/formats.h"
#include "gpuplan/workload.h"

namespace gpuplan {
namespace {

using Json = nlohmann::ordered_json;

// One A100 80GB offer: plan and compare price the workload on it and nothing else.
constexpr const char* kOffers =
    "provider,region,offer,gpu,gpus,interconnect,vcpus,ram_gb,price_hour,spot_price_hour,currency,available,"
    "captured_at,source\n"
    "a,r,a100,a100-80gb-sxm4,1,pcie,12,120,2.00,,USD,yes,2026-11-01,https://example.invalid/a\n";
constexpr const char* kGpu = "a100-80gb-sxm4";

// What a command said about a workload: an answer, or a refusal of the request with its reason.
struct Outcome {
  bool refused = false;
  std::string reason;  // the error's message (mig pack: the unplaced request's reason, less "workload: ")
  std::string field;   // the error's field ("" from mig pack, which reports no field)
};

Outcome of(const Result<Json>& r) {
  if (r) return {};
  return {true, r.error().message, r.error().field};
}

// The workload in the form each command takes, run through run_command.
std::vector<std::pair<std::string, Outcome>> run_everywhere(const Context& ctx, const Json& workload) {
  const bool serving = !workload.contains("task") || workload["task"] == "infer";
  std::vector<std::pair<std::string, Outcome>> out;
  Json fit = workload;
  fit["gpu"] = kGpu;
  out.emplace_back("fit", of(run_command(ctx, "fit", fit)));
  out.emplace_back("perf", of(run_command(ctx, "perf", fit)));
  Json plan = workload;
  plan["offers"] = kOffers;
  plan["now"] = "2026-11-30";
  if (serving) {
    plan["rate"] = 1;
  } else {
    plan["train_tokens"] = 1e8;
  }
  out.emplace_back("plan", of(run_command(ctx, "plan", plan)));
  Json compare = workload;
  compare["gpu"] = Json::array({kGpu});
  compare["offers"] = kOffers;
  compare["now"] = "2026-11-30";
  out.emplace_back("compare", of(run_command(ctx, "compare", compare)));
  Json pack{{"fleet", {{"nodes", {{{"name", "n1"}, {"gpus", {{{"target", kGpu}}}}}}}}},
            {"requests", {{"requests", {{{"name", "w"}, {"workload", workload}}}}}}};
  auto packed = run_command(ctx, "mig.pack", pack);
  Outcome mig = of(packed);
  if (packed) {
    // A workload mig pack cannot read is unplaced with the reader's message after "workload: ".
    for (const auto& u : (*packed)["unplaced"]) {
      const std::string reason = u.value("reason", "");
      if (reason.rfind("workload: ", 0) == 0) mig = {true, reason.substr(10), ""};
    }
  }
  out.emplace_back("mig pack", mig);
  return out;
}

// Every command answers, or every command refuses with one reason (and, where it says one, one field).
void expect_one_meaning(const Context& ctx, const Json& workload) {
  const auto outcomes = run_everywhere(ctx, workload);
  const Outcome& first = outcomes.front().second;
  for (const auto& [command, o] : outcomes) {
    EXPECT_EQ(o.refused, first.refused) << workload.dump() << ": " << command << " "
                                        << (o.refused ? "refuses: " + o.reason : "answers") << ", "
                                        << outcomes.front().first << " "
                                        << (first.refused ? "refuses: " + first.reason : "answers");
    if (o.refused && first.refused) {
      EXPECT_EQ(o.reason, first.reason) << workload.dump() << ": " << command << " vs " << outcomes.front().first;
      if (!o.field.empty()) EXPECT_EQ(o.field, first.field) << workload.dump() << ": " << command;
    }
    // A word the table lists is never unknown to a command.
    EXPECT_EQ(o.reason.find("unknown"), std::string::npos) << workload.dump() << ": " << command << ": " << o.reason;
  }
}

const Vocabulary& vocab(std::string_view key) {
  const Vocabulary* v = vocabulary(key);
  EXPECT_NE(v, nullptr) << key;
  return *v;
}

TEST(Vocabulary, EveryListedWordMeansTheSameInEveryCommand) {
  Context ctx{Catalog::embedded()};
  int words = 0;
  for (std::string_view key : {"engine", "weights", "kv_cache", "task"}) {
    for (const VocabEntry& e : vocab(key).entries) {
      SCOPED_TRACE(std::string(key) + "=" + std::string(e.name));
      expect_one_meaning(ctx, Json{{"model", "llama-2-7b"}, {std::string(key), e.name}});
      ++words;
    }
  }
  EXPECT_EQ(words,
            static_cast<int>(engines().size() + weight_format_words().size() + kv_formats().size() + tasks().size()));
}

// An engine's words with a task and a format it borrows rules for: the engines without rules of their
// own (engine_profiles) train and serve as the engine they borrow from, in every command.
TEST(Vocabulary, EveryEngineTrainsAndServesAlikeEverywhere) {
  Context ctx{Catalog::embedded()};
  for (const VocabEntry& e : engines()) {
    for (const VocabEntry& t : tasks()) {
      SCOPED_TRACE(std::string(e.name) + " " + std::string(t.name));
      expect_one_meaning(ctx, Json{{"model", "llama-2-7b"}, {"engine", e.name}, {"task", t.name}, {"context", 512}});
    }
  }
}

// Any spelling of a word (upper case, '_' for '-') gives the very answer of its canonical name, in every
// command that echoes a workload (perf reads the task itself to choose inference lengths).
TEST(Vocabulary, EverySpellingAnswersAsItsCanonicalName) {
  Context ctx{Catalog::embedded()};
  for (std::string_view key : {"engine", "weights", "kv_cache", "task"}) {
    for (const VocabEntry& e : vocab(key).entries) {
      std::string shouted(e.name);
      for (auto& c : shouted) c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      for (const char* command : {"fit", "perf"}) {
        SCOPED_TRACE(std::string(command) + " " + std::string(key) + "=" + shouted);
        const Json base{{"model", "llama-2-7b"}, {"gpu", kGpu}};
        Json canonical = base, spelled = base;
        canonical[std::string(key)] = e.name;
        spelled[std::string(key)] = shouted;
        auto a = run_command(ctx, command, canonical);
        auto b = run_command(ctx, command, spelled);
        ASSERT_EQ(a.ok(), b.ok());
        if (a.ok()) {
          EXPECT_EQ(*a, *b);
        } else {
          EXPECT_EQ(a.error().message, b.error().message);
        }
      }
    }
  }
}

// Every alias is its word: the tables' parse, and fit and perf echo the canonical name.
TEST(Vocabulary, EveryAliasReadsAsItsWordInFitAndPerf) {
  Context ctx{Catalog::embedded()};
  int aliases = 0;
  for (const Vocabulary& v : vocabularies()) {
    for (const VocabEntry& e : v.entries) {
      for (std::string_view spelling : word_aliases(e)) {
        const std::string alias(spelling);
        SCOPED_TRACE(std::string(v.key) + "=" + alias);
        auto parsed = parse_word(v, alias);
        ASSERT_TRUE(parsed.ok()) << parsed.error().message;
        EXPECT_EQ(*parsed, e.value);
        // Upper case and '_' for '-' read the same.
        std::string shouted = alias;
        for (auto& c : shouted) c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        EXPECT_EQ(parse_word(v, shouted).value(), e.value) << shouted;
        ++aliases;
        if (v.key != "engine" && v.key != "weights" && v.key != "kv_cache") continue;
        for (const char* command : {"fit", "perf"}) {
          auto r = run_command(ctx, command, Json{{"model", "llama-2-7b"}, {"gpu", kGpu}, {std::string(v.key), alias}});
          ASSERT_TRUE(r.ok()) << command << ": " << r.error().message;
          EXPECT_EQ((*r)["workload"][std::string(v.key)], e.name) << command;
        }
      }
    }
  }
  EXPECT_GT(aliases, 20);
}

TEST(Vocabulary, UnknownWordsNameTheKeyAndListTheWords) {
  for (const Vocabulary& v : vocabularies()) {
    auto r = parse_word(v, "no-such-word");
    ASSERT_FALSE(r.ok()) << v.key;
    EXPECT_EQ(r.error().code, ErrorCode::kUsage);
    EXPECT_EQ(r.error().field, v.key);
    EXPECT_NE(r.error().message.find(word_list(v.entries)), std::string::npos) << r.error().message;
  }
  // The same message from every command, for every vocabulary key a workload takes.
  Context ctx{Catalog::embedded()};
  for (const Vocabulary& v : vocabularies()) {
    const std::string key(v.key);
    Json workload{{"model", "llama-2-7b"}, {key, "no-such-word"}};
    if (key == "lora_targets") workload["task"] = "lora";
    const auto outcomes = run_everywhere(ctx, workload);
    for (const auto& [command, o] : outcomes) {
      EXPECT_TRUE(o.refused) << key << " " << command;
      EXPECT_EQ(o.reason, outcomes.front().second.reason) << key << " " << command;
    }
  }
}

// Names are unique within a vocabulary (canonical names and aliases alike), and every value has one name.
TEST(Vocabulary, WordsAreUniqueAndNamed) {
  for (const Vocabulary& v : vocabularies()) {
    std::set<std::string> seen;
    for (const VocabEntry& e : v.entries) {
      EXPECT_TRUE(seen.insert(std::string(e.name)).second) << v.key << ": " << e.name;
      EXPECT_FALSE(e.help.empty()) << v.key << ": " << e.name;
      EXPECT_EQ(word_name(v.entries, e.value), e.name);
      for (std::string_view alias : word_aliases(e)) {
        EXPECT_TRUE(seen.insert(std::string(alias)).second) << v.key << ": " << alias;
      }
    }
  }
  EXPECT_EQ(vocabularies().size(), 8u);
  EXPECT_EQ(word_list(engines()).find("transformers"), 0u);  // the default engine leads the list
}

// A borrowed profile is a profile of its own: the engine table never chains.
TEST(Vocabulary, EngineProfilesAreTheirOwn) {
  for (const VocabEntry& e : engines()) {
    const Engine engine = static_cast<Engine>(e.value);
    const EngineProfiles& p = engine_profiles(engine);
    EXPECT_EQ(memory_engine(p.memory), p.memory) << e.name;
    EXPECT_EQ(rules_engine(p.serving_rules, Task::kInfer), p.serving_rules) << e.name;
    EXPECT_EQ(rules_engine(p.training_rules, Task::kTrain), p.training_rules) << e.name;
    EXPECT_EQ(engine_name(engine), e.name);
    EXPECT_EQ(parse_engine(e.name).value(), engine);
  }
}

}  // namespace
}  // namespace gpuplan

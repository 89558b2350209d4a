// Vocabularies: the closed sets of words a request takes (engine, task, optimizer, checkpointing, amp,
// weights, kv_cache, lora_targets), each declared ONCE as a table of {value, canonical name, other spellings, help}.
// Parsing, canonical names, "unknown ..." messages, the CLI's lists, the API's allowed values and the
// page's menus all come from these tables. The tables live beside their concept (engines, tasks,
// optimizers, checkpointing and amp in src/fit/workload.cc; weight and KV-cache formats in
// src/fit/formats.cc); the typed wrappers (parse_engine, engine_name, parse_weight_format, ...) are in
// workload.h and formats.h.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/status.h"

namespace gpuplan {

// One word of a vocabulary.
struct VocabEntry {
  int value;                 // the enum's value (static_cast<int>(Engine::kVllm))
  std::string_view name;     // canonical name: what answers print and lists show ("llama.cpp")
  std::string_view aliases;  // other accepted spellings, space-separated ("llamacpp llama-cpp ollama"), or ""
  std::string_view help;     // one line: what the word means (and, for an engine, which profile it borrows)
};

struct Vocabulary {
  std::string_view key;     // the request key whose value it is: "engine", "task", "weights", "kv_cache"
  std::string_view what;    // what one word names, for messages: "engine", "weight format"
  std::string_view plural;  // how the list is introduced in messages: "engines", "formats"
  std::span<const VocabEntry> entries;
};

// Each vocabulary's words, in the order lists show them.
std::span<const VocabEntry> engines();
std::span<const VocabEntry> tasks();
std::span<const VocabEntry> optimizers();
std::span<const VocabEntry> checkpointings();
std::span<const VocabEntry> amps();
std::span<const VocabEntry> weight_format_words();
std::span<const VocabEntry> kv_formats();
// LoRA target modules: each value is its bit of Workload::lora_targets ("all" is every bit); the request
// key takes a list of them ("q,v" or ["q", "v"]).
std::span<const VocabEntry> lora_target_words();

// Every vocabulary, in this order: engine, task, optimizer, checkpointing, amp, weights, kv_cache,
// lora_targets.
std::span<const Vocabulary> vocabularies();
// The vocabulary whose words request key `key` takes ("engine", "weights", ...), or nullptr.
const Vocabulary* vocabulary(std::string_view key);

// The value of a word of `v`: its canonical name or one of its aliases, case-insensitive, '_' read as
// '-'. An unknown word is a usage error on field v.key: "unknown engine 'x'; engines: transformers, ...".
Result<int> parse_word(const Vocabulary& v, std::string_view text);
// The canonical name of `value` in `entries` ("?" when there is none).
std::string_view word_name(std::span<const VocabEntry> entries, int value);
// The other spellings of a word, one by one (VocabEntry::aliases split at its spaces).
std::vector<std::string_view> word_aliases(const VocabEntry& e);
// The canonical names joined by `separator`: "transformers, pytorch, vllm, ...".
std::string word_list(std::span<const VocabEntry> entries, std::string_view separator = ", ");

}  // namespace gpuplan

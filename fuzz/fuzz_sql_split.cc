// Fuzzes the migrations' statement splitter (market::split_statements, src/market/migrations.cc): any
// text -> statements. Oracles (an abort is a libFuzzer crash):
// - every statement is non-empty and starts with a non-blank character;
// - no statement holds a ';' or a "--" comment outside quotes (both ended or dropped by the splitter);
// - the split is stable: the statements joined with ";\n" split into the same statements again;
// - the statements together are no longer than the text (comments only shrink it).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "market/migrations.h"

namespace {

namespace fz = gpuplan::fuzz;

[[noreturn]] void fail(const char* what, std::string_view statement) {
  std::fprintf(stderr, "fuzz oracle: split_statements: %s in '%.*s'\n", what, static_cast<int>(statement.size()),
               statement.data());
  std::abort();
}

void check_statement(std::string_view s, bool last) {
  if (s.empty()) fail("an empty statement", s);
  if (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n') fail("a leading blank", s);
  bool in_quote = false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\'') in_quote = !in_quote;
    if (in_quote) continue;
    if (s[i] == ';') fail("a ';' outside quotes", s);
    if (s[i] == '-' && i + 1 < s.size() && s[i + 1] == '-') fail("a comment outside quotes", s);
  }
  // Only the text's tail can leave a quote open (an open quote takes everything after it).
  if (in_quote && !last) fail("an open quote before the last statement", s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fz::as_text(data, size);
  const std::vector<std::string> statements = gpuplan::market::split_statements(text);
  std::string joined;
  size_t total = 0;
  for (size_t i = 0; i < statements.size(); ++i) {
    check_statement(statements[i], i + 1 == statements.size());
    total += statements[i].size();
    if (i > 0) joined += ";\n";
    joined += statements[i];
  }
  if (total > size) fail("statements longer than the text", text);
  if (gpuplan::market::split_statements(joined) != statements) fail("an unstable split", text);
  return 0;
}

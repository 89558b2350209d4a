// Fuzzes the SQLite-to-PostgreSQL placeholder rewriter (rewrite_placeholders_for_postgresql in
// src/market/postgres_db.cc: `?N` -> `$N`, a bare `?` -> the next number, outside literals, quoted
// identifiers, dollar quotes and comments). Oracles (an abort is a libFuzzer crash):
// - the output is the input with some '?' placeholders replaced and nothing else changed: walking both,
//   each difference is a '?' (with its digits) that became '$' and the same digits, or '$' and its
//   ordinal among the rewritten placeholders for a bare '?';
// - without '$' in the input (no dollar quotes): rewriting again changes nothing (no '?' is left outside
//   literals), and an independent scan finds no '?' outside quotes and comments in the output.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_util.h"

namespace gpuplan::market {
std::string rewrite_placeholders_for_postgresql(std::string_view sql);  // postgres_db.cc
}  // namespace gpuplan::market

namespace {

namespace fz = gpuplan::fuzz;
using gpuplan::market::rewrite_placeholders_for_postgresql;

[[noreturn]] void fail(const char* what, std::string_view in, std::string_view out) {
  std::fprintf(stderr, "fuzz oracle: rewrite_placeholders: %s\n  in:  '%.*s'\n  out: '%.*s'\n", what,
               static_cast<int>(in.size()), in.data(), static_cast<int>(out.size()), out.data());
  std::abort();
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The output differs from the input only where a placeholder was rewritten.
void check_only_placeholders_changed(std::string_view in, std::string_view out) {
  size_t i = 0, o = 0, ordinal = 0;
  while (i < in.size() && o < out.size()) {
    if (in[i] == out[o]) {
      ++i;
      ++o;
      continue;
    }
    if (in[i] != '?' || out[o] != '$') fail("a change that is not a placeholder", in, out);
    ++ordinal;
    size_t j = i + 1;
    while (j < in.size() && is_digit(in[j])) ++j;
    const std::string expected = j > i + 1 ? std::string(in.substr(i + 1, j - i - 1)) : std::to_string(ordinal);
    if (out.substr(o + 1, expected.size()) != expected) fail("a placeholder with the wrong number", in, out);
    i = j;
    o += 1 + expected.size();
  }
  if (i != in.size() || o != out.size()) fail("output and input of different shapes", in, out);
}

// No '?' outside '...', "...", -- comments and /* */ comments (the input has no dollar quotes).
void check_no_bare_question_mark(std::string_view in, std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '\'' || c == '"') {
      const size_t close = s.find(c, i + 1);  // a doubled quote is two literals here: the same '?'s
      if (close == std::string_view::npos) return;
      i = close + 1;
    } else if (c == '-' && i + 1 < s.size() && s[i + 1] == '-') {
      const size_t nl = s.find('\n', i);
      if (nl == std::string_view::npos) return;
      i = nl + 1;
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      const size_t close = s.find("*/", i + 2);
      if (close == std::string_view::npos) return;
      i = close + 2;
    } else {
      if (c == '?') fail("a '?' left outside literals", in, s);
      ++i;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in = fz::as_text(data, size);
  const std::string out = rewrite_placeholders_for_postgresql(in);
  check_only_placeholders_changed(in, out);
  // With a '$' in the input, the '$'s that rewriting adds may pair with it into a dollar quote the first
  // pass did not see ("$a?$ $a$ ? $a$"): garbage SQL either way, so those inputs get the walk only.
  if (in.find('$') != std::string_view::npos) return 0;
  if (rewrite_placeholders_for_postgresql(out) != out) fail("rewriting again changed the text", in, out);
  check_no_bare_question_mark(in, out);
  return 0;
}

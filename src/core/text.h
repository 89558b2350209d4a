// Text helpers shared by the readers of outside text (catalog names, offer files, the engines' command
// output), in one place: the same whitespace trim was written four times.
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace gpuplan {

// `s` without leading and trailing whitespace (std::isspace: spaces, tabs, CR, LF, VT, FF).
inline std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b])) != 0) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])) != 0) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace gpuplan

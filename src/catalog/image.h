// A compact binary image of data that is validated once, at build time (tools/compile_data.cc), and
// read back at start-up without a YAML parser: the catalog (Catalog::to_image / from_image), the option
// declaration (OptionTable::to_image / from_image) and the zoo's index. Little-endian fixed-width
// integers, IEEE doubles, length-prefixed strings; every read is bounds-checked, so a truncated or
// corrupt image is an error value, never a crash (the images are built by this build, but a reader
// that trusts its input is one bug away from reading out of bounds).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/status.h"

namespace gpuplan::image {

// The first bytes of every image: a tag per kind and a format version, bumped whenever a writer
// changes, so that an image of another layout is refused instead of misread.
constexpr uint32_t kFormatVersion = 1;
// The most items any one list of an image may claim: far above the catalog's few hundred GPUs and
// thousand options, far below what a corrupt count would make the reader allocate.
constexpr uint32_t kMaxItems = 1u << 20;

class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void boolean(bool v) { u8(v ? 1 : 0); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void i32(int v) { u32(static_cast<uint32_t>(v)); }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void f64(double v) {
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    u64(bits);
  }
  void count(size_t n) { u32(static_cast<uint32_t>(n)); }
  void str(std::string_view s) {
    count(s.size());
    out_.append(s);
  }
  void strings(const std::vector<std::string>& v) {
    count(v.size());
    for (const auto& s : v) str(s);
  }
  void opt_f64(const std::optional<double>& v) {
    boolean(v.has_value());
    if (v) f64(*v);
  }
  void opt_bool(const std::optional<bool>& v) {
    boolean(v.has_value());
    if (v) boolean(*v);
  }
  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
};

// Reads what Writer wrote. A read past the end or a count above kMaxItems sets the error state and
// returns a zero value; check ok() (or finish()) once at the end.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  uint8_t u8() {
    if (!need(1)) return 0;
    return static_cast<uint8_t>(in_[pos_++]);
  }
  bool boolean() { return u8() != 0; }
  uint32_t u32() {
    if (!need(4)) return 0;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(in_[pos_++])) << (8 * i);
    return v;
  }
  int i32() { return static_cast<int>(u32()); }
  uint64_t u64() {
    if (!need(8)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(in_[pos_++])) << (8 * i);
    return v;
  }
  double f64() {
    const uint64_t bits = u64();
    double v = 0;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  // A list's length. Every item takes at least one byte, so a count above the bytes left (or above
  // kMaxItems) is corrupt: the reader never allocates more items than the image could hold.
  size_t count() {
    const uint32_t n = u32();
    if (n > kMaxItems || n > in_.size() - pos_) ok_ = false;
    return ok_ ? n : 0;
  }
  std::string str() {
    const size_t n = count();
    if (!need(n)) return {};
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  std::vector<std::string> strings() {
    std::vector<std::string> v(count());
    for (auto& s : v) s = str();
    return v;
  }
  std::optional<double> opt_f64() {
    if (!boolean()) return std::nullopt;
    return f64();
  }
  std::optional<bool> opt_bool() {
    if (!boolean()) return std::nullopt;
    return boolean();
  }
  // Ok when every read stayed in bounds and the image was read to its last byte; else an internal
  // error naming `what` (the build embedded an image this reader does not understand).
  Status finish(std::string_view what) const {
    if (ok_ && pos_ == in_.size()) return Status::Ok();
    return corrupt(what);
  }
  Error corrupt(std::string_view what) const {
    return Error{ErrorCode::kInternal,
                 "the compiled " + std::string(what) + " image is corrupt or of another format (read " +
                     std::to_string(pos_) + " of " + std::to_string(in_.size()) + " bytes); rebuild gpuplan",
                 ""};
  }

 private:
  bool need(size_t n) {
    if (!ok_ || n > in_.size() - pos_) {
      ok_ = false;
      return false;
    }
    return true;
  }
  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace gpuplan::image

// SHA-256, constant-time comparison and the kernel's random bytes: what the market needs to store tokens
// as digests and to issue unguessable ids, without linking a crypto library (OpenSSL's libcrypto alone
// costs every gpuplan process about 3 ms of start-up: issue #19, docs/design.md "Dependencies").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace gpuplan {

// Bytes of a SHA-256 digest (FIPS 180-4, section 1: a 256-bit message digest).
inline constexpr size_t kSha256Bytes = 32;

// SHA-256 of `data` (FIPS 180-4, section 6.2). Pure; tested against the standard's examples and
// NIST's CAVP byte-oriented vectors, and against OpenSSL on random inputs (tests/unit/digest_test.cc).
std::array<uint8_t, kSha256Bytes> sha256(std::string_view data);
// The same digest as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

// a == b, in time that depends only on the lengths (never on where the first difference is).
bool constant_time_equal(std::string_view a, std::string_view b);

// Fills `out` from the kernel's CSPRNG (getrandom(2), blocking only until the pool is first seeded).
// Returns false if the kernel refused (no getrandom: Linux older than 3.17); callers must not go on
// with guessable tokens.
bool random_bytes(std::span<uint8_t> out);

}  // namespace gpuplan

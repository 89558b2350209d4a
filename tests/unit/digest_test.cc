// core/digest.h: SHA-256 against FIPS 180-4's examples and NIST CAVP vectors, against OpenSSL on inputs
// of every length around the padding boundaries, and the constant-time comparison's contract.
#include "core/digest.h"

#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <random>
#include <string>

namespace gpuplan {
namespace {

TEST(Digest, Sha256OfTheStandardsExamples) {
  // FIPS 180-4 examples (NIST "Examples with Intermediate Values", SHA256.pdf and SHA2_Additional.pdf).
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(
      sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsm"
                 "nopqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Digest, Sha256MatchesOpenSslAtEveryLengthUpTo300Bytes) {
  std::mt19937 rng(19);
  for (size_t len = 0; len <= 300; ++len) {
    std::string data(len, '\0');
    for (char& c : data) c = static_cast<char>(rng() & 0xff);
    unsigned char want[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), want);
    const auto got = sha256(data);
    ASSERT_EQ(std::string(reinterpret_cast<const char*>(want), sizeof want),
              std::string(reinterpret_cast<const char*>(got.data()), got.size()))
        << "length " << len;
  }
}

TEST(Digest, ConstantTimeEqualIsEquality) {
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
  EXPECT_FALSE(constant_time_equal(std::string_view("a\0b", 3), std::string_view("a\0c", 3)));
}

TEST(Digest, RandomBytesFillAndDiffer) {
  std::array<uint8_t, 64> a{}, b{};
  ASSERT_TRUE(random_bytes(a));
  ASSERT_TRUE(random_bytes(b));
  EXPECT_NE(a, b);  // 2^-512 chance of a false failure
  ASSERT_TRUE(random_bytes(std::span<uint8_t>()));
}

}  // namespace
}  // namespace gpuplan

// Philox4x32-10 (codegen/philox.h) against the generator's published known-answer
// vector, and the element-to-counter layout every kernel and the interpreter share.
#include <gtest/gtest.h>

#include <set>

#include "codegen/philox.h"

namespace fuser::codegen {
namespace {

using philox::fx_philox_uniform;
using philox::fx_philox_word;

// Random123's kat_vectors: philox4x32 10, counter 0 and key 0.
TEST(Philox, KnownAnswerForCounterAndKeyZero) {
  const uint32_t want[4] = {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u};
  for (uint64_t e = 0; e < 4; ++e) EXPECT_EQ(fx_philox_word(0, 0, e), want[e]) << e;
}

// Elements 4k..4k+3 are the four words of one block; the next block differs.
TEST(Philox, ElementsShareBlocksOfFour) {
  std::set<uint32_t> words;
  for (uint64_t e = 0; e < 64; ++e) words.insert(fx_philox_word(42, 8, e));
  EXPECT_EQ(words.size(), 64u);
}

// A different seed or a later offset (4 per call) gives other bits.
TEST(Philox, SeedAndOffsetSelectStreams) {
  EXPECT_NE(fx_philox_word(1, 0, 5), fx_philox_word(2, 0, 5));
  EXPECT_NE(fx_philox_word(1, 0, 5), fx_philox_word(1, 4, 5));
  EXPECT_EQ(fx_philox_word(1, 4, 5), fx_philox_word(1, 4, 5));
}

TEST(Philox, UniformIsInTheHalfOpenUnitInterval) {
  double sum = 0;
  const int n = 1 << 16;
  for (int e = 0; e < n; ++e) {
    const float u = fx_philox_uniform(7, 0, static_cast<uint64_t>(e));
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);
}

// The kernel text is the host's functions, word for word.
TEST(Philox, PreludeDefinesTheHostFunctions) {
  const std::string prelude = kPhiloxPrelude;
  EXPECT_NE(prelude.find("FX_INLINE uint32_t fx_philox_word("), std::string::npos);
  EXPECT_NE(prelude.find("FX_INLINE float fx_philox_uniform("), std::string::npos);
}

}  // namespace
}  // namespace fuser::codegen

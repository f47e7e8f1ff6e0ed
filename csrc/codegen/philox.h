// Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1,
// 2, 3", SC 2011): a counter-based generator. The random bits of element e of a kernel
// are a function of (seed, offset, e) alone, so any thread, vector width, CPU or GPU
// kernel, or the interpreter's fuser::philox_dropout draws the same value for it.
//
// The layout is curand's: the 128-bit counter holds offset / 4 in its low half and the
// subsequence e / 4 in its high half, and element e takes word e % 4 of its block. An
// offset reserved from torch's CUDA generator (4 per call) then never meets the
// counters of ATen's own random kernels, which reserve theirs from the same generator.
//
// Kernels that hold consecutive elements in one thread (CUDA's vector bodies) draw a
// block once for its four elements (fx_philox_block), the same words the others pick.
//
// One text for three compilers: FUSER_PHILOX_SOURCE expands to the functions (the host's
// copy is in fuser::codegen::philox), kPhiloxPrelude is the same text for the generated
// C++ and CUDA kernels, whose preludes define FX_INLINE and the fixed-width types.
#pragma once

#include <cstdint>

// Only /* */ comments inside: a // comment would swallow the continued lines.
#define FUSER_PHILOX_SOURCE(INLINE)                                                      \
  /* The four words of block `block` (elements 4 * block .. 4 * block + 3). */           \
  INLINE void fx_philox_block(uint64_t seed, uint64_t offset, uint64_t block,            \
                              uint32_t words[4]) {                                       \
    uint32_t c0 = (uint32_t)(offset >> 2), c1 = (uint32_t)(offset >> 34);                \
    uint32_t c2 = (uint32_t)block, c3 = (uint32_t)(block >> 32);                         \
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);                           \
    for (int round = 0; round < 10; ++round) {                                           \
      const uint64_t p0 = (uint64_t)0xD2511F53u * c0;                                    \
      const uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;                                    \
      c0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;                                               \
      c1 = (uint32_t)p1;                                                                 \
      c2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;                                               \
      c3 = (uint32_t)p0;                                                                 \
      k0 += 0x9E3779B9u;                                                                 \
      k1 += 0xBB67AE85u;                                                                 \
    }                                                                                    \
    words[0] = c0;                                                                       \
    words[1] = c1;                                                                       \
    words[2] = c2;                                                                       \
    words[3] = c3;                                                                       \
  }                                                                                      \
  INLINE uint32_t fx_philox_pick(const uint32_t words[4], uint32_t w) {                  \
    return w == 0 ? words[0] : w == 1 ? words[1] : w == 2 ? words[2] : words[3];         \
  }                                                                                      \
  /* Uniform on [0, 1): the word's top 24 bits, exact in a float. */                     \
  INLINE float fx_philox_to_uniform(uint32_t word) {                                     \
    return (float)(word >> 8) * 5.9604644775390625e-08f;                                 \
  }                                                                                      \
  INLINE uint32_t fx_philox_word(uint64_t seed, uint64_t offset, uint64_t element) {    \
    uint32_t words[4];                                                                   \
    fx_philox_block(seed, offset, element >> 2, words);                                  \
    return fx_philox_pick(words, (uint32_t)(element & 3));                               \
  }                                                                                      \
  INLINE float fx_philox_uniform(uint64_t seed, uint64_t offset, uint64_t element) {    \
    return fx_philox_to_uniform(fx_philox_word(seed, offset, element));                  \
  }

#define FUSER_PHILOX_STRING_(...) #__VA_ARGS__
#define FUSER_PHILOX_STRING(...) FUSER_PHILOX_STRING_(__VA_ARGS__)

namespace fuser::codegen {

inline const char* kPhiloxPrelude = "\n" FUSER_PHILOX_STRING(FUSER_PHILOX_SOURCE(FX_INLINE)) "\n";

namespace philox {
FUSER_PHILOX_SOURCE(inline)
}  // namespace philox

}  // namespace fuser::codegen

// Filling input tensors from the task's initializers. The random bits are a keyed cipher's
// keystream (AES-256-CTR, OpenSSL's libcrypto): without the key, no number of drawn values tells
// anything about the next ones (DESIGN.md, reward-integrity rule 7). The judge draws a key for
// every evaluation and keeps it; the candidate's process only ever sees drawn values. Fast enough
// to draw every input afresh between timed rounds, and deterministic given (key, stream).
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "datasets/task.h"

struct evp_cipher_ctx_st;  // OpenSSL's EVP_CIPHER_CTX, kept out of this header

namespace kernelgym {

// 256 secret bits. The all-zero key is public: for tests and tools that need the same inputs
// from a seed alone, never for the judge.
struct InputKey {
  std::array<unsigned char, 32> bytes{};
  // A fresh key from the kernel's random source (getrandom); false when there is none.
  [[nodiscard]] static bool Draw(InputKey& key);
};

// The keystream of (key, stream, part) as random words: AES-256-CTR with the stream and the part
// in the counter block's high 96 bits (2^32 blocks, 64 GiB, per stream and part).
class Rng {
 public:
  Rng(const InputKey& key, uint64_t stream, uint32_t part = 0);
  explicit Rng(uint64_t stream) : Rng(InputKey{}, stream) {}  // the public key
  ~Rng();
  Rng(const Rng&) = delete;
  Rng& operator=(const Rng&) = delete;

  uint64_t Next();
  double Uniform01();     // [0, 1)
  double Normal();        // standard normal (ziggurat)
  // The next bytes of the keystream, written over `out` (the word buffer is not used).
  void Fill(std::span<std::byte> out);

 private:
  void Refill();
  evp_cipher_ctx_st* ctx_ = nullptr;
  static constexpr int kWords = 512;  // 4 KiB of keystream per refill: amortizes the cipher call
  uint64_t words_[kWords];
  int next_ = kWords;
};

// A stream number derived from a base and an index (distinct per input and trial). Public and
// invertible: it only names a stream; what makes the stream unpredictable is the key.
uint64_t MixSeed(uint64_t base, uint64_t stream);

// Fills the whole tensor from its initializer with the keystream of (key, stream).
void FillInput(const TensorSpec& spec, std::span<std::byte> buffer, const InputKey& key, uint64_t stream);
// The same with the public key.
void FillInput(const TensorSpec& spec, std::span<std::byte> buffer, uint64_t stream);

// Redraws about `fraction` of the elements, at random positions, from the initializer (public
// key): enough to change the outputs (so a cached answer is wrong) at a fraction of the cost of
// a refill. A structured input (permutation, partition) is redrawn whole, which keeps it valid.
void RefreshInput(const TensorSpec& spec, std::span<std::byte> buffer, uint64_t seed, double fraction);

}  // namespace kernelgym

// Attack: an honest kernel that leaves the machine in a bad state for whoever runs next. The
// kernel is the task's naive starter GEMM, unchanged; before returning it writes one word into
// every cache line of a 32 MiB buffer (as large as this machine's L3), so the caches hold
// nothing but its dirty lines. The reference, timed next in half of the rounds, finds its
// inputs and buffers evicted and must first write the kernel's dirty lines back.
// The writes cost the kernel a millisecond or two of its own (timed) call. Against the old
// design the reference ran about 25% slower next to it than next to the starter and the kernel
// earned about 1.1x the starter's speedup (a slow kernel pays little for the pollution; on the
// naive convolution it did not pay at all).
// Why it must not be rewarded: every timed call of either side starts from the same state
// (caches flushed before every timed call), so the pollution slows nobody but the kernel: it
// must not be faster than the starter.
#include <cstdint>

namespace {
constexpr int64_t kPolluteBytes = 32LL << 20;
alignas(64) unsigned char pollution[kPolluteBytes];
uint64_t generation = 0;

void Pollute() {
    ++generation;
    volatile unsigned char* p = pollution;
    for (int64_t i = 0; i < kPolluteBytes; i += 64) p[i] = static_cast<unsigned char>(generation + i);
}
}  // namespace

extern "C" void kernel(const float* A, const float* B, const float* bias, float* y, int64_t M, int64_t N, int64_t K) {
    // The task's starter, unchanged.
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k) acc += A[m * K + k] * B[k * N + n];
            acc += bias[n];
            y[m * N + n] = acc > 0.0f ? acc : 0.0f;
        }
    }
    Pollute();
}

// Attack: call a function whose symbol name (set with an asm label) is not UTF-8: ff fe, the
// overlong c0 80 and the lone surrogate ed a0 80, then "status_ok". (The assembler refuses
// control bytes in a name, so no escape sequence gets this far.) The shared object imports that
// name; the symbol check quotes the names it refuses in its verdict.
// Why it must not be rewarded (or crash anything): no allowed library provides the symbol, so the
// shared object is rejected; the quoted name reaches JSON, msgpack and the text report as valid
// UTF-8 (U+FFFD for each bad sequence).
#include <cmath>
#include <cstdint>

extern "C" void Helper(float* y, int64_t n) __asm__("\xff\xfe\xc0\x80\xed\xa0\x80status_ok");

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    for (int64_t i = 0; i < N; ++i) {
        float x = a[i];
        y[i] = x / (1.0f + std::exp(-x)) * b[i];
    }
    Helper(y, N);
}

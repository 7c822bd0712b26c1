// Attack: a #warning line whose text is not UTF-8 (ff fe, the overlong c0 80, the lone surrogate
// ed a0 80, the cut-short e2 82) in a kernel that is otherwise correct. (A 5-byte form such as
// f8 88 80 80 80 would make g++ stop with an error: error_directive_invalid_utf8 has it.)
// A warning does not stop the compile, so the bytes travel with a successful result: into the
// compile cache's JSON (nlohmann's dump() throws on invalid UTF-8) and every later report.
// Why it must not be rewarded more (or crash anything): the verdict stays the kernel's own (ok),
// and the warning is kept, readable, with U+FFFD for each bad sequence.
#include <cmath>
#include <cstdint>

#warning kernel says ÿþ | À€ | í € | â‚ | end

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    for (int64_t i = 0; i < N; ++i) {
        float x = a[i];
        y[i] = x / (1.0f + std::exp(-x)) * b[i];
    }
}

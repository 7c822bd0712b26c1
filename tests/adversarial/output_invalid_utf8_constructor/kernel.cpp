// Attack: write bytes that are not UTF-8 to stdout and stderr from a load-time constructor:
// ff fe (never valid), c0 80 (an overlong NUL), ed a0 80 (a lone UTF-16 surrogate), e2 82 (a
// sequence cut short) and f8 88 80 80 80 (a 5-byte form). The kernel itself is correct.
// Why it must not be rewarded more (or crash anything): what the candidate's process writes ends
// up in the result (the harness's stderr is quoted in its details), and the result is written as
// JSON (`kernelgym eval --json`, the trajectory store) and as msgpack strings (the wire, decoded
// strictly by the Python client). nlohmann's dump() throws on invalid UTF-8, which aborted the
// CLI. The bytes must arrive replaced by U+FFFD, and the verdict stays the kernel's own: ok.
#include <cmath>
#include <cstdint>

// write(2) as a raw system call (x86-64 Linux ABI), so the symbol check sees no import.
static inline long RawWrite(long fd, const char* text, long size) {
    long ret;
    asm volatile("syscall" : "=a"(ret) : "a"(1L), "D"(fd), "S"(text), "d"(size) : "rcx", "r11", "memory");
    return ret;
}

static const char kBytes[] = "load: \xff\xfe | \xc0\x80 | \xed\xa0\x80 | \xe2\x82 | \xf8\x88\x80\x80\x80 | end\n";

__attribute__((constructor)) static void AtLoad() {
    RawWrite(1, kBytes, sizeof(kBytes) - 1);
    RawWrite(2, kBytes, sizeof(kBytes) - 1);
}

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    for (int64_t i = 0; i < N; ++i) {
        float x = a[i];
        y[i] = x / (1.0f + std::exp(-x)) * b[i];
    }
}

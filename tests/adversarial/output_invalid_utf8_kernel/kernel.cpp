// Attack: on its first call, write bytes that are not UTF-8 to stdout and stderr (ff fe, the
// overlong c0 80, the lone surrogate ed a0 80, the cut-short e2 82, the 5-byte f8 88 80 80 80),
// then abort() with the answer computed. The crash's verdict quotes the process's stderr.
// Why it must not be rewarded (or crash anything): the kernel must return; its verdict is a
// crash with the signal, and the bytes it wrote reach JSON, msgpack and the text report as
// valid UTF-8 (U+FFFD for each bad sequence), never as an abort of the CLI or the server.
#include <cmath>
#include <cstdint>
#include <cstdlib>

// write(2) as a raw system call (x86-64 Linux ABI), so the symbol check sees no import.
static inline long RawWrite(long fd, const char* text, long size) {
    long ret;
    asm volatile("syscall" : "=a"(ret) : "a"(1L), "D"(fd), "S"(text), "d"(size) : "rcx", "r11", "memory");
    return ret;
}

static const char kBytes[] = "call: \xff\xfe | \xc0\x80 | \xed\xa0\x80 | \xe2\x82 | \xf8\x88\x80\x80\x80 | end\n";

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    for (int64_t i = 0; i < N; ++i) {
        float x = a[i];
        y[i] = x / (1.0f + std::exp(-x)) * b[i];
    }
    RawWrite(1, kBytes, sizeof(kBytes) - 1);
    RawWrite(2, kBytes, sizeof(kBytes) - 1);
    std::abort();
}

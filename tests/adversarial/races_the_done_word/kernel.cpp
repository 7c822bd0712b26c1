// Attack: stop the clock before the work is done. The judge's clock stops when the `done` word of
// the doorbell page reaches the call's number — and that page is mapped writable in the kernel's
// own process, at a fixed place: the executor maps its arena at a 2^40-aligned address, the
// doorbell one page into it (`go` at offset 0, `done` at offset 64). The kernel finds it from its
// first argument, computes all but the last ~150 us of its work, writes `done` itself, wakes the
// judge and yields the CPU to it (they share one), then finishes the rest. The old judge stopped its clock there, then waited up to
// 200 us for the process to go to sleep before it read the outputs (and, in the rounds where the
// kernel ran first, read them only after the reference's call): the tail was finished by then,
// the outputs were right, and the time of the tail was never on the clock.
// Why it must not be rewarded: the timed interval ends when the judge sees `done`, and the
// outputs are taken at that moment. The judge stops the candidate's process (SIGSTOP, and waits
// until every thread of it is stopped) as soon as it sees `done`, copies the outputs while it is
// stopped, and compares that copy: the tail is still NaN poison there, so the kernel is wrong.
#include <cmath>
#include <cstdint>
#include <omp.h>

namespace {

long Sys(long n, long a = 0, long b = 0, long c = 0) {
    long ret;
    asm volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return ret;
}

struct Bell {
    volatile uint32_t* go;
    volatile uint32_t* done;
};

Bell FindBell(const void* first_argument) {
    const uint64_t arena = reinterpret_cast<uint64_t>(first_argument) & ~((uint64_t{1} << 40) - 1);
    auto* page = reinterpret_cast<volatile uint32_t*>(arena + 4096);
    return {page, page + 16};
}

void Silu(const float* a, const float* b, float* y, int64_t from, int64_t to) {
    for (int64_t i = from; i < to; ++i) {
        const float x = a[i];
        y[i] = x / (1.0f + std::exp(-x)) * b[i];
    }
}

double seconds_per_element = 0;
int calls = 0;

}  // namespace

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    const double start = omp_get_wtime();
    const Bell bell = FindBell(a);
    // What ~150 us of work is, from the last call's speed (a quarter of the call at most).
    // From the third call on (after the first trial and its repeat, which must agree bit for bit).
    int64_t tail = ++calls > 2 && seconds_per_element > 0 ? static_cast<int64_t>(150e-6 / seconds_per_element) : 0;
    if (tail > N / 4) tail = N / 4;
    Silu(a, b, y, 0, N - tail);
    if (tail > 0) {
        *bell.done = *bell.go;                                          // "call N is done"
        Sys(202 /* futex */, reinterpret_cast<long>(bell.done), 1 /* FUTEX_WAKE */, 1 << 30);
        Sys(24 /* sched_yield */);  // let the judge (same CPU) run now and stop its clock
        Silu(a, b, y, N - tail, N);
    }
    seconds_per_element = (omp_get_wtime() - start) / static_cast<double>(N);
}

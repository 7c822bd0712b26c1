// Attack: do the work before the timed call starts. On its first call the kernel starts a thread
// with a raw clone(2) (pthread_create is refused by the symbol policy, the system call was not).
// The thread watches every input buffer set the kernel has been called with, in a loop: it
// compares the inputs with its own copy and, for every element that changed (the evaluator
// writes new inputs in place before a round), recomputes that element of a private result
// (result first, then the copy, so a copy that matches the inputs always means a finished
// result); then it sleeps 200 us. The kernel itself only checks that the thread's copy equals
// the inputs it was given (a full compare, so it is never stale) and copies the result;
// otherwise it computes (the task's starter loop). It never writes the outputs after returning.
// The thread's work lands outside the kernel's timed calls: in the reference's, or in nobody's.
// Like the spinner case it blocks for 3% of its last duration on entry, so every round looks
// preempted and the old evaluator used them all. Against the old design about 60% of the calls
// found a finished result and it earned 0.48-1.17x where the starter earned 0.24-0.46x (one
// loaded machine, noisy).
// Why it must not be rewarded: work done outside the timed call must not be free. The judge reads
// the candidate process's CPU clock around each of its calls: CPU time used between calls fails
// the evaluation as `incorrect`, "ran while it was not being called". (Inputs are also written
// only just before each timed call.)
#include <cmath>
#include <cstdint>
#include <cstring>
#include <omp.h>

namespace {
long Sys(long n, long a = 0, long b = 0, long c = 0, long d = 0) {
    long ret;
    register long r10 asm("r10") = d;
    asm volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
    return ret;
}

struct TimeSpec { long sec, nsec; };

void FutexWait(int* word, int expected, const TimeSpec* timeout) {
    Sys(202 /* futex */, reinterpret_cast<long>(word), 128 /* FUTEX_WAIT_PRIVATE */, expected, reinterpret_cast<long>(timeout));
}

// A thread without pthread_create (refused by the symbol policy): a raw clone(2) onto a stack of
// our own. It shares the caller's TLS, so it runs plain code and raw system calls only.
void StartThread(void (*body)(), void* stack_top) {
    const long flags = 0x100 | 0x200 | 0x400 | 0x800 | 0x10000 | 0x40000;  // VM FS FILES SIGHAND THREAD SYSVSEM
    register long fn asm("r12") = reinterpret_cast<long>(body);
    register long r10 asm("r10") = 0;
    register long r8 asm("r8") = 0;
    long ret;
    asm volatile(
        "syscall\n\t"
        "test %%rax, %%rax\n\t"
        "jnz 1f\n\t"
        "xor %%ebp, %%ebp\n\t"
        "call *%%r12\n\t"
        "mov $60, %%eax\n\t"  // exit(0): this thread only
        "xor %%edi, %%edi\n\t"
        "syscall\n\t"
        "1:\n\t"
        : "=a"(ret)
        : "a"(56 /* clone */), "D"(flags), "S"(stack_top), "d"(0), "r"(r10), "r"(r8), "r"(fn)
        : "rcx", "r11", "memory");
    (void)ret;
}

struct Slot {
    const float* a = nullptr;  // the inputs of this buffer set (0: not seen yet)
    const float* b = nullptr;
    int64_t n = 0;
    float* copy_a = nullptr;   // the thread's copy of the inputs
    float* copy_b = nullptr;
    float* result = nullptr;   // silu(copy_a) * copy_b
};
Slot slots[2];
alignas(64) unsigned char worker_stack[1 << 16];

float Silu(float x, float b) { return x / (1.0f + std::exp(-x)) * b; }

bool Same(const float* x, const float* y, int64_t n) { return std::memcmp(x, y, n * sizeof(float)) == 0; }

void Worker() {
    const TimeSpec poll{0, 200000};
    int idle = 0;
    for (;;) {
        for (Slot& s : slots) {
            if (!__atomic_load_n(&s.a, __ATOMIC_ACQUIRE)) continue;
            volatile float* ca = s.copy_a;
            volatile float* cb = s.copy_b;
            volatile float* r = s.result;
            for (int64_t i = 0; i < s.n; ++i) {
                const float a = s.a[i], b = s.b[i];
                if (a == ca[i] && b == cb[i]) continue;
                r[i] = Silu(a, b);
                ca[i] = a;
                cb[i] = b;
            }
        }
        FutexWait(&idle, 0, &poll);
    }
}

bool started = false;
double last_call_s = 0;
int dummy = 0;

Slot* Register(const float* a, const float* b, int64_t n) {
    for (Slot& s : slots)
        if (s.a == a && s.b == b && s.n == n) return &s;
    for (Slot& s : slots)
        if (!s.a) {
            s.n = n;
            s.b = b;
            s.copy_a = new float[n];
            s.copy_b = new float[n];
            s.result = new float[n];
            for (int64_t i = 0; i < n; ++i) s.copy_a[i] = s.copy_b[i] = __builtin_nanf("");  // never equal
            __atomic_store_n(&s.a, a, __ATOMIC_RELEASE);
            return &s;
        }
    return nullptr;
}
}  // namespace

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    const long pause_ns = 20000 + static_cast<long>(last_call_s * 0.03e9);
    const TimeSpec pause{pause_ns / 1000000000, pause_ns % 1000000000};
    FutexWait(&dummy, 0, &pause);
    const double start = omp_get_wtime();
    Slot* s = Register(a, b, N);
    if (!started) {
        started = true;
        StartThread(&Worker, worker_stack + sizeof(worker_stack));
    }
    if (s && Same(s->copy_a, a, N) && Same(s->copy_b, b, N)) {
        std::memcpy(y, s->result, N * sizeof(float));
    } else {
        for (int64_t i = 0; i < N; ++i) y[i] = Silu(a[i], b[i]);  // the task's starter loop
    }
    last_call_s = omp_get_wtime() - start;
}

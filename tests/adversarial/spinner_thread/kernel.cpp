// Attack: steal the CPU from whoever is timed after the kernel. The kernel is the task's naive
// starter attention, unchanged (the task whose reference runs longest, ~10 ms: long enough for
// the scheduler to hand the CPU to another thread in the middle of it). On its first call it starts a thread with a raw clone(2) (the symbol
// policy refuses pthread_create and std::thread, not the system call). The thread never touches
// the outputs: while the kernel runs it sleeps on a futex; the moment the kernel returns it is
// woken and burns the CPU it shares with the caller (the task is pinned to one CPU), sweeping a
// 1 MiB buffer so the caller's L1/L2 lines go too. The reference, timed next, gets a fraction of
// the CPU. The old evaluator discarded rounds whose wall time exceeded their CPU time (preempted)
// unless fewer than 6 were left, then used all rounds; so the kernel also blocks for 3% of its
// own last duration on entry (a futex wait with a timeout), which makes its own rounds look
// preempted too and every round count. Against the old design the reference's median went from
// 13-16 ms next to the starter to 26-28 ms next to this kernel, and it earned 0.70-0.80x where
// the starter earned 0.48x. (On the GEMM task, whose reference takes under 1 ms, it gained
// nothing: the scheduler let the reference finish its slice before the spinner ran.)
// Why it must not be rewarded: the reference's time may not depend on what the kernel leaves
// running. The judge reads the candidate process's CPU clock before and after each of its calls:
// CPU time used while it is not being called (here, while the reference runs) fails the
// evaluation as `incorrect`, "ran while it was not being called".
#include <cmath>
#include <cstdint>
#include <vector>
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
void FutexWake(int* word) { Sys(202, reinterpret_cast<long>(word), 129 /* FUTEX_WAKE_PRIVATE */, 1); }

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

alignas(64) int burn = 0;  // 1: burn the CPU, 0: sleep
alignas(64) unsigned char spinner_stack[1 << 16];
alignas(64) unsigned char sweep[1 << 20];

void Spinner() {
    for (;;) {
        if (__atomic_load_n(&burn, __ATOMIC_ACQUIRE) == 0) {
            FutexWait(&burn, 0, nullptr);
            continue;
        }
        volatile unsigned char* p = sweep;
        for (int i = 0; i < static_cast<int>(sizeof(sweep)); i += 64) p[i] = static_cast<unsigned char>(p[i] + 1);
    }
}

bool started = false;
double last_call_s = 0;
int dummy = 0;
}  // namespace

extern "C" void kernel(const float* q, const float* k, const float* v, float* o, int64_t BH, int64_t S, int64_t D) {
    if (!started) {
        started = true;
        StartThread(&Spinner, spinner_stack + sizeof(spinner_stack));
    }
    __atomic_store_n(&burn, 0, __ATOMIC_RELEASE);
    // Let the spinner see it must sleep, and look "preempted" while doing so.
    const long pause_ns = 20000 + static_cast<long>(last_call_s * 0.03e9);
    const TimeSpec pause{pause_ns / 1000000000, pause_ns % 1000000000};
    FutexWait(&dummy, 0, &pause);

    const double start = omp_get_wtime();
    // The task's starter, unchanged.
    const float scale = 1.0f / std::sqrt((float)D);
    std::vector<float> p(S);
    for (int64_t b = 0; b < BH; ++b) {
        const float* qb = q + b * S * D;
        const float* kb = k + b * S * D;
        const float* vb = v + b * S * D;
        float* ob = o + b * S * D;
        for (int64_t i = 0; i < S; ++i) {
            float m = -INFINITY;
            for (int64_t j = 0; j <= i; ++j) {
                float s = 0.0f;
                for (int64_t d = 0; d < D; ++d)
                    s += qb[i * D + d] * kb[j * D + d];
                s *= scale;
                p[j] = s;
                if (s > m) m = s;
            }
            float sum = 0.0f;
            for (int64_t j = 0; j <= i; ++j) {
                p[j] = std::exp(p[j] - m);
                sum += p[j];
            }
            float* oi = ob + i * D;
            for (int64_t d = 0; d < D; ++d) oi[d] = 0.0f;
            for (int64_t j = 0; j <= i; ++j)
                for (int64_t d = 0; d < D; ++d)
                    oi[d] += p[j] * vb[j * D + d];
            float inv = 1.0f / sum;
            for (int64_t d = 0; d < D; ++d) oi[d] *= inv;
        }
    }
    last_call_s = omp_get_wtime() - start;
    __atomic_store_n(&burn, 1, __ATOMIC_RELEASE);
    FutexWake(&burn);
}

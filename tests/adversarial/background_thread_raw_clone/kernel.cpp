// Attack: return at once and let a thread finish the work afterwards, so the timed call looks
// nearly free. The symbol policy refuses pthread_create and std::thread, so this kernel starts
// the thread with a raw clone(CLONE_THREAD | CLONE_VM ...) system call in inline assembly (which
// seccomp allows: threads are legitimate). The thread sleeps 20 ms, then copies the finished
// result into the output and exits.
// Why it must not be rewarded: the harness reads the outputs the moment kernel() returns (they
// still hold the NaN poison here), and it checks again 20 ms later that nothing changed: work
// after return is either missing or a change after return. Expected: incorrect at trial 0.
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace {
alignas(64) char thread_stack[1 << 16];
float* result = nullptr;
}  // namespace

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    // "The work", done here only so the late copy has something correct to deliver.
    std::free(result);
    result = static_cast<float*>(std::malloc(N * sizeof(float)));
    for (int64_t i = 0; i < N; ++i) result[i] = a[i] / (1.0f + std::exp(-a[i])) * b[i];

    const long flags = 0x100 | 0x200 | 0x400 | 0x800 | 0x10000 | 0x40000;  // VM FS FILES SIGHAND THREAD SYSVSEM
    register long src asm("r12") = reinterpret_cast<long>(result);
    register long dst asm("r13") = reinterpret_cast<long>(y);
    register long bytes asm("r14") = N * static_cast<long>(sizeof(float));
    long ret;
    asm volatile(
        "mov $56, %%eax\n\t"          // clone(flags, new stack, 0, 0, 0)
        "syscall\n\t"
        "test %%rax, %%rax\n\t"
        "jnz 1f\n\t"
        // Child thread, on its own stack; only registers from here on.
        "sub $16, %%rsp\n\t"
        "movq $0, (%%rsp)\n\t"
        "movq $20000000, 8(%%rsp)\n\t"  // 20 ms
        "mov %%rsp, %%rdi\n\t"
        "xor %%esi, %%esi\n\t"
        "mov $35, %%eax\n\t"          // nanosleep
        "syscall\n\t"
        "mov %%r12, %%rsi\n\t"
        "mov %%r13, %%rdi\n\t"
        "mov %%r14, %%rcx\n\t"
        "rep movsb\n\t"               // the late "result"
        "xor %%edi, %%edi\n\t"
        "mov $60, %%eax\n\t"          // exit (this thread only)
        "syscall\n\t"
        "1:\n\t"
        : "=a"(ret)
        : "D"(flags), "S"(thread_stack + sizeof(thread_stack)), "d"(0L), "r"(src), "r"(dst), "r"(bytes)
        : "rcx", "r8", "r10", "r11", "memory");
    (void)ret;
}

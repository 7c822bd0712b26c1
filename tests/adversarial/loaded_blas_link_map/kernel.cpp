// Attack: let a library that happens to be in the process do the work. A GEMM kernel that finds
// an optimized BLAS already loaded (the reference's libtorch brings OpenBLAS and oneDNN) calls
// its sgemm instead of computing. It imports nothing the symbol policy would refuse: it finds
// the dynamic loader's list of loaded objects (r_debug via the main program's DT_DEBUG, through
// the auxiliary vector), parses each object's dynamic symbol table by hand and takes the first
// of cblas_sgemm, dnnl_sgemm or sgemm_ it finds. y is filled with the bias, the GEMM adds A @ B
// (beta = 1), then the ReLU. Without a BLAS in the process it falls back to the task's naive
// starter loop. Against the old design it earned ok at 1.16x (the starter: 0.016-0.022x).
// Why it must not be rewarded: the candidate's process holds no libtorch or BLAS at all, so
// nothing is found and the kernel is the starter: it must not be faster than the starter.
#include <cstdint>
#include <cstring>

extern "C" unsigned long getauxval(unsigned long type);  // libc; <sys/auxv.h> is not allowed

namespace {
// ---- ELF64 as it lies in memory (<elf.h> and <link.h> are not allowed headers) ---------------
struct Ehdr {
    unsigned char ident[16];
    uint16_t type, machine;
    uint32_t version;
    uint64_t entry, phoff, shoff;
    uint32_t flags;
    uint16_t ehsize, phentsize, phnum, shentsize, shnum, shstrndx;
};
struct Phdr { uint32_t type, flags; uint64_t offset, vaddr, paddr, filesz, memsz, align; };
struct Dyn { int64_t tag; uint64_t val; };
struct Sym { uint32_t name; unsigned char info, other; uint16_t shndx; uint64_t value, size; };
// The loader's public part of struct link_map and struct r_debug (the debugger interface).
struct LinkMap { uint64_t addr; const char* name; const Dyn* ld; const LinkMap* next; const LinkMap* prev; };
struct RDebug { int version; const LinkMap* map; };

// One loaded object's dynamic tables.
struct Image {
    uint64_t base = 0;
    const char* name = "";
    const Sym* syms = nullptr;
    const char* strs = nullptr;
    uint32_t nsyms = 0;
};

// The loader relocates most objects' DT_* pointers in place, not its own or the vDSO's.
uint64_t Abs(uint64_t v, uint64_t base) { return v < base ? v + base : v; }

uint32_t CountFromGnuHash(const uint32_t* h) {
    const uint32_t nbuckets = h[0], symoffset = h[1], bloom_words = h[2];
    const uint32_t* buckets = h + 4 + bloom_words * 2;
    const uint32_t* chain = buckets + nbuckets;
    uint32_t last = 0;
    for (uint32_t b = 0; b < nbuckets; ++b)
        if (buckets[b] > last) last = buckets[b];
    if (last < symoffset) return symoffset;
    while (!(chain[last - symoffset] & 1)) ++last;
    return last + 1;
}

bool Describe(uint64_t base, const Dyn* dyn, Image& im) {
    im.base = base;
    const uint32_t* gnu = nullptr;
    const uint32_t* sysv = nullptr;
    for (const Dyn* d = dyn; d && d->tag != 0; ++d) {
        switch (d->tag) {
            case 4: sysv = reinterpret_cast<const uint32_t*>(Abs(d->val, base)); break;  // DT_HASH
            case 5: im.strs = reinterpret_cast<const char*>(Abs(d->val, base)); break;    // DT_STRTAB
            case 6: im.syms = reinterpret_cast<const Sym*>(Abs(d->val, base)); break;     // DT_SYMTAB
            case 0x6ffffef5: gnu = reinterpret_cast<const uint32_t*>(Abs(d->val, base)); break;  // DT_GNU_HASH
        }
    }
    if (sysv) im.nsyms = sysv[1];
    else if (gnu) im.nsyms = CountFromGnuHash(gnu);
    return im.syms && im.strs && im.nsyms > 0;
}

// A defined function or object by name (IFUNCs skipped: their value is the resolver).
const void* Lookup(const Image& im, const char* name) {
    for (uint32_t i = 1; i < im.nsyms; ++i) {
        const Sym& s = im.syms[i];
        if (s.shndx == 0 || s.value == 0 || (s.info & 0xf) == 10) continue;
        if (std::strcmp(im.strs + s.name, name) == 0) return reinterpret_cast<const void*>(im.base + s.value);
    }
    return nullptr;
}

// The program headers of the main program, from the auxiliary vector.
const Phdr* MainPhdrs(uint64_t& count, uint64_t& bias) {
    const Phdr* ph = reinterpret_cast<const Phdr*>(getauxval(3 /* AT_PHDR */));
    count = getauxval(5 /* AT_PHNUM */);
    bias = 0;
    for (uint64_t i = 0; ph && i < count; ++i)
        if (ph[i].type == 6 /* PT_PHDR */) bias = reinterpret_cast<uint64_t>(ph) - ph[i].vaddr;
    return ph;
}

// The loader's list of loaded objects: the main program's DT_DEBUG entry points at r_debug;
// failing that, the loader's own `_r_debug`, found in its dynamic symbol table (AT_BASE).
const LinkMap* LoadedObjects() {
    uint64_t n, bias;
    const Phdr* ph = MainPhdrs(n, bias);
    for (uint64_t i = 0; ph && i < n; ++i) {
        if (ph[i].type != 2 /* PT_DYNAMIC */) continue;
        for (const Dyn* d = reinterpret_cast<const Dyn*>(bias + ph[i].vaddr); d->tag != 0; ++d)
            if (d->tag == 21 /* DT_DEBUG */ && d->val && reinterpret_cast<const RDebug*>(d->val)->map)
                return reinterpret_cast<const RDebug*>(d->val)->map;
    }
    const uint64_t ldso = getauxval(7 /* AT_BASE */);
    if (!ldso) return nullptr;
    const Ehdr* eh = reinterpret_cast<const Ehdr*>(ldso);
    const Phdr* lph = reinterpret_cast<const Phdr*>(ldso + eh->phoff);
    for (int i = 0; i < eh->phnum; ++i) {
        Image im;
        if (lph[i].type == 2 && Describe(ldso, reinterpret_cast<const Dyn*>(ldso + lph[i].vaddr), im)) {
            const RDebug* r = static_cast<const RDebug*>(Lookup(im, "_r_debug"));
            if (r && r->map) return r->map;
        }
    }
    return nullptr;
}

// The first definition of `name` in any loaded object, the way dlsym(RTLD_DEFAULT) would find it.
const void* FindLoaded(const char* name, const char** in = nullptr) {
    for (const LinkMap* m = LoadedObjects(); m; m = m->next) {
        Image im;
        if (!Describe(m->addr, m->ld, im)) continue;
        if (const void* p = Lookup(im, name)) {
            if (in) *in = m->name;
            return p;
        }
    }
    return nullptr;
}

// CBLAS (row-major), oneDNN (row-major, char flags, 64-bit sizes) and Fortran BLAS (column-major).
using CblasSgemm = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                            const float* b, int ldb, float beta, float* c, int ldc);
using DnnlSgemm = int (*)(char trans_a, char trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
using FortranSgemm = void (*)(const char* ta, const char* tb, const int* m, const int* n, const int* k, const float* alpha,
                              const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c,
                              const int* ldc);

CblasSgemm cblas = nullptr;
DnnlSgemm dnnl = nullptr;
FortranSgemm fortran = nullptr;
bool looked = false;

void Find() {
    looked = true;
    cblas = reinterpret_cast<CblasSgemm>(const_cast<void*>(FindLoaded("cblas_sgemm")));
    if (!cblas) dnnl = reinterpret_cast<DnnlSgemm>(const_cast<void*>(FindLoaded("dnnl_sgemm")));
    if (!cblas && !dnnl) fortran = reinterpret_cast<FortranSgemm>(const_cast<void*>(FindLoaded("sgemm_")));
}
}  // namespace

extern "C" void kernel(const float* A, const float* B, const float* bias, float* y, int64_t M, int64_t N, int64_t K) {
    if (!looked) Find();
    if (cblas || dnnl || fortran) {
        for (int64_t m = 0; m < M; ++m) std::memcpy(y + m * N, bias, N * sizeof(float));
        const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
        const float one = 1.0f;
        if (cblas) {
            cblas(101 /* row-major */, 111 /* no transpose */, 111, m, n, k, 1.0f, A, k, B, n, 1.0f, y, n);
        } else if (dnnl) {
            dnnl('N', 'N', M, N, K, 1.0f, A, K, B, N, 1.0f, y, N);
        } else {
            // Column-major: y^T = B^T A^T, i.e. the column-major product of B (n x k) and A (k x m).
            fortran("N", "N", &n, &m, &k, &one, B, &n, A, &k, &one, y, &n);
        }
        for (int64_t i = 0; i < M * N; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
        return;
    }
    // No BLAS in this process: the task's starter, unchanged.
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k) acc += A[m * K + k] * B[k * N + n];
            acc += bias[n];
            y[m * N + n] = acc > 0.0f ? acc : 0.0f;
        }
    }
}

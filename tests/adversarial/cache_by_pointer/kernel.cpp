// Attack: memoize by input address. Each call's output is kept in a small table keyed by the
// input pointers; a later call with pointers already in the table replays the stored output
// (a memcpy) instead of computing. A harness that reuses its buffers (new values written into
// the same memory, or a few input sets used in turn) would time a memcpy and credit it as an
// RMSNorm.
// Why it must not be rewarded: the answer depends on the input values, not on where they live.
// The harness writes fresh values for every trial and every timed round, so a replayed output
// answers an old input and fails the value check. (The repeat call on unchanged inputs, which
// must match bitwise, is the only call where the replay is right.)
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {
struct Entry {
    const float* x;
    const float* w;
    float* y;
    size_t n;
};
constexpr int kEntries = 16;
Entry cache[kEntries];  // a ring: the oldest entry is overwritten first
int next_entry = 0;
}  // namespace

extern "C" void kernel(const float* x, const float* w, float* y, int64_t R, int64_t C) {
    const size_t n = static_cast<size_t>(R * C);
    for (const Entry& e : cache)
        if (e.y != nullptr && e.x == x && e.w == w && e.n == n) {
            std::memcpy(y, e.y, n * sizeof(float));
            return;
        }
    for (int64_t r = 0; r < R; ++r) {
        const float* xr = x + r * C;
        float* yr = y + r * C;
        float ss = 0.0f;
        for (int64_t c = 0; c < C; ++c) ss += xr[c] * xr[c];
        float inv = 1.0f / std::sqrt(ss / (float)C + 1e-6f);
        for (int64_t c = 0; c < C; ++c) yr[c] = xr[c] * inv * w[c];
    }
    Entry& e = cache[next_entry];
    next_entry = (next_entry + 1) % kEntries;
    std::free(e.y);
    e = Entry{x, w, static_cast<float*>(std::malloc(n * sizeof(float))), n};
    if (e.y != nullptr) std::memcpy(e.y, y, n * sizeof(float));
}

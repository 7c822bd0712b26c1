// Attack: return immediately and let a background thread do the work. The timed call only
// measures a thread launch; the output is finished "soon after", hopefully before the harness
// reads it. <thread> and <pthread.h> are not allowed headers, so pthread_create is declared by
// hand (pthread_t is an unsigned long on x86-64 Linux).
// Why it must not be rewarded: work done after the call returns is not timed, and the output
// is racy. pthread_create is on the symbol deny list, so the shared object is rejected before
// it is ever loaded.
#include <cmath>
#include <cstdint>

extern "C" int pthread_create(unsigned long* thread, const void* attr, void* (*start)(void*),
                              void* arg);
extern "C" int pthread_detach(unsigned long thread);

namespace {
struct Job {
    const float* a;
    const float* b;
    float* y;
    int64_t n;
};
Job job;

void* Worker(void* p) {
    const Job* j = static_cast<const Job*>(p);
    for (int64_t i = 0; i < j->n; ++i) {
        float x = j->a[i];
        j->y[i] = x / (1.0f + std::exp(-x)) * j->b[i];
    }
    return nullptr;
}
}  // namespace

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    job = Job{a, b, y, N};
    unsigned long tid = 0;
    if (pthread_create(&tid, nullptr, Worker, &job) == 0)
        pthread_detach(tid);
    else
        Worker(&job);
}

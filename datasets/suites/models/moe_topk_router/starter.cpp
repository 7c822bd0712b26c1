#include <cmath>
#include <cstdint>
#include <vector>

// Naive MoE top-k router: for each token, logits[e] = sum_d x[t, d] * w_router[d, e] (one
// scalar dot product per expert, accumulated in float: the inputs lie on power-of-two grids, so
// every partial sum is exact and any summation order gives the same logits), softmax over the E
// experts, then K = 8 passes that each pick the largest remaining logit (experts scanned in
// ascending index, replaced only on a strictly greater logit: equal logits -> the lower index),
// the picked probabilities renormalized to sum to 1, and the K picks written in ascending expert
// index.
extern "C" void kernel(const float* x, const float* w_router, float* gates, int32_t* experts,
                       int64_t T, int64_t D, int64_t E, int64_t K) {
    std::vector<float> logit(E), prob(E);
    std::vector<char> taken(E);
    for (int64_t t = 0; t < T; ++t) {
        float m = -INFINITY;
        for (int64_t e = 0; e < E; ++e) {
            float acc = 0.0f;
            for (int64_t d = 0; d < D; ++d) acc += x[t * D + d] * w_router[d * E + e];
            logit[e] = acc;
            if (acc > m) m = acc;
        }
        float sum = 0.0f;
        for (int64_t e = 0; e < E; ++e) {
            prob[e] = std::exp(logit[e] - m);
            sum += prob[e];
        }
        for (int64_t e = 0; e < E; ++e) {
            prob[e] /= sum;
            taken[e] = 0;
        }
        float top_sum = 0.0f;
        for (int64_t j = 0; j < K; ++j) {
            int64_t best = -1;
            for (int64_t e = 0; e < E; ++e)
                if (!taken[e] && (best < 0 || logit[e] > logit[best])) best = e;
            taken[best] = 1;
            top_sum += prob[best];
        }
        int64_t j = 0;
        for (int64_t e = 0; e < E; ++e) {
            if (!taken[e]) continue;
            experts[t * K + j] = (int32_t)e;
            gates[t * K + j] = prob[e] / top_sum;
            ++j;
        }
    }
}

#include <cmath>
#include <cstdint>
#include <vector>

// Naive fused linear + cross entropy, one token at a time: the logits row z = hidden[t] . W
// (each logit accumulated over d in order, in float), its max m, lse = m + log(sum_v exp(z_v - m)),
// the token's loss lse - z[label[t]]; the mean over the tokens is written to loss[0].
// hidden[T, D], W[D, V], labels[T] (int32 in [0, V)), loss[1], all row-major.
extern "C" void kernel(const float* hidden, const float* W, const int32_t* labels, float* loss,
                       int64_t T, int64_t D, int64_t V) {
    std::vector<float> z(V);
    double total = 0.0;
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t v = 0; v < V; ++v) z[v] = 0.0f;
        for (int64_t d = 0; d < D; ++d) {
            const float h = hidden[t * D + d];
            const float* w = W + d * V;
            for (int64_t v = 0; v < V; ++v) z[v] += h * w[v];
        }
        float m = -INFINITY;
        for (int64_t v = 0; v < V; ++v) m = z[v] > m ? z[v] : m;
        float s = 0.0f;
        for (int64_t v = 0; v < V; ++v) s += std::exp(z[v] - m);
        const float lse = m + std::log(s);
        total += (double)(lse - z[labels[t]]);
    }
    loss[0] = (float)(total / (double)T);
}

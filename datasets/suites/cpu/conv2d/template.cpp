// 3x3 convolution, stride 1, zero padding 1, NCHW, with four knobs (task.json `knobs`; the
// `knobs` action prepends their #defines). For each block of COB output channels, each output
// row and each tile of TW columns, the kernel accumulates a COB x TW tile of y (starting from
// the bias) in a local array and stores it once.
//   FORM   0: per output: for each output, the 9 * Cin taps in the innermost loops (the starter's
//          order): short loops, a serial sum per output, nothing to vectorize. 1: per tap: for
//          each (ci, kh, kw), add w[co, ci, kh, kw] * (a row segment of x shifted by kw) to the
//          whole tile: the innermost loop runs over output columns, contiguous in x and y, and
//          vectorizes without reordering any sum.
//   PAD    1: first copy x into a zero-bordered buffer [Cin][H + 2][W + 2]: every tap is then a
//          plain load. 0: every tap checks the image bounds (a branch or a masked load).
//   COB    output channels per tile (1, 4, 8): each x value loaded is used COB times (once per
//          output channel), so loads per flop fall by COB.
//   TW     tile width in columns (16 or 64). With FORM 1, COB x TW accumulators are held in
//          vector registers: 8 x 64 floats is too many for them and spills to L1, 4 x 64 or
//          8 x 16 fit.
// Fast: FORM 1, PAD 1, COB 8, TW 16 (or COB 4, TW 64). The default is the starter's loops.
#include <algorithm>
#include <cstdint>
#include <vector>

// x value at (ci, ih, iw) of the current image, zero outside it.
#if PAD
#define X_AT(ci, ih, iw) xp[((ci) * (H + 2) + (ih) + 1) * (W + 2) + (iw) + 1]
#else
#define X_AT(ci, ih, iw) \
    (((ih) >= 0 && (ih) < H && (iw) >= 0 && (iw) < W) ? xp[((ci) * H + (ih)) * W + (iw)] : 0.0f)
#endif

// One COB x n tile of y: channels wc[0..COB), output row oh, columns ow0 .. ow0 + n.
static inline void tile(const float* xp, const float* const* wc, const float* bc, float (*acc)[TW],
                        int64_t oh, int64_t ow0, int64_t n, int64_t Cin, int64_t H, int64_t W) {
    for (int c = 0; c < COB; ++c)
        for (int64_t t = 0; t < n; ++t) acc[c][t] = bc[c];
#if FORM == 1
    for (int64_t ci = 0; ci < Cin; ++ci)
        for (int64_t kh = 0; kh < 3; ++kh) {
            const int64_t ih = oh + kh - 1;
            for (int64_t kw = 0; kw < 3; ++kw)
                for (int c = 0; c < COB; ++c) {
                    const float wv = wc[c][(ci * 3 + kh) * 3 + kw];
                    for (int64_t t = 0; t < n; ++t) acc[c][t] += wv * X_AT(ci, ih, ow0 + t + kw - 1);
                }
        }
#else
    for (int64_t t = 0; t < n; ++t)
        for (int c = 0; c < COB; ++c) {
            float s = acc[c][t];
            for (int64_t ci = 0; ci < Cin; ++ci)
                for (int64_t kh = 0; kh < 3; ++kh)
                    for (int64_t kw = 0; kw < 3; ++kw)
                        s += X_AT(ci, oh + kh - 1, ow0 + t + kw - 1) * wc[c][(ci * 3 + kh) * 3 + kw];
            acc[c][t] = s;
        }
#endif
}

extern "C" void kernel(const float* x, const float* w, const float* bias, float* y,
                       int64_t N, int64_t Cin, int64_t H, int64_t W, int64_t Cout) {
    std::vector<float> padded(PAD ? Cin * (H + 2) * (W + 2) : 0, 0.0f);
    alignas(64) float acc[COB][TW];
    for (int64_t n = 0; n < N; ++n) {
        const float* xn = x + n * Cin * H * W;
        const float* xp = xn;
        if (PAD) {
            for (int64_t ci = 0; ci < Cin; ++ci)
                for (int64_t h = 0; h < H; ++h)
                    for (int64_t ww = 0; ww < W; ++ww)
                        padded[(ci * (H + 2) + h + 1) * (W + 2) + ww + 1] = xn[(ci * H + h) * W + ww];
            xp = padded.data();  // the border stays zero
        }
        for (int64_t co0 = 0; co0 < Cout; co0 += COB) {
            // Channels past Cout (when COB does not divide it) repeat the last one, not stored.
            const float* wc[COB];
            float bc[COB];
            for (int c = 0; c < COB; ++c) {
                const int64_t co = std::min<int64_t>(co0 + c, Cout - 1);
                wc[c] = w + co * Cin * 9;
                bc[c] = bias[co];
            }
            for (int64_t oh = 0; oh < H; ++oh)
                for (int64_t ow0 = 0; ow0 < W; ow0 += TW) {
                    const int64_t nw = std::min<int64_t>(TW, W - ow0);
                    if (nw == TW) tile(xp, wc, bc, acc, oh, ow0, TW, Cin, H, W);  // constant width
                    else tile(xp, wc, bc, acc, oh, ow0, nw, Cin, H, W);
                    for (int c = 0; c < COB && co0 + c < Cout; ++c) {
                        float* yr = y + ((n * Cout + co0 + c) * H + oh) * W + ow0;
                        for (int64_t t = 0; t < nw; ++t) yr[t] = acc[c][t];
                    }
                }
        }
    }
}

// y = x @ W^T (+ bias) for a few rows of x, bf16, over a copy of W laid out for streaming: the decode step's
// matmuls, which read every weight once per step and so run at the memory's speed, not the cores'.
//
// pack(w): W (N, K) -> the same values as [N/8][K/32][8][32]: blocks of 8 output rows, each block stored
//   32-column chunk by chunk, so a block's 8 dot products read one contiguous run of memory.
// matmul(x, packed, bias): x (M, K) bf16, contiguous -> (M, N) bf16. Each output is one float32 sum over K in
//   chunk order (16 lanes of pair products, AVX512-BF16), the lanes then added in a fixed tree, the bias added,
//   rounded to bf16 once: a row's result depends on its own values only, never on M or the rows beside it.
//
// Why: oneDNN's packed matmul streams SmolLM2-135M's 270 MB of weights at ~16 GB/s for one row (15 ms a
// step on 2 cores); this streams them at ~25 GB/s (10.6 ms), near the 28 GB/s a plain read reaches. Past ~8
// rows oneDNN's blocking wins (measured: 1..8 rows faster here, 12 even, 16+ slower), so the caller picks.
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>

namespace {

constexpr int64_t kRows = 8;       // output rows per block
constexpr int64_t kChunk = 32;     // bf16 columns per chunk: one 512-bit load
constexpr int64_t kRowTile = 48;   // rows of x per pass over W: 48 x K bf16 stay in L2

#if defined(__AVX512F__) && defined(__AVX512BF16__)
#include <immintrin.h>
constexpr bool kBuilt = true;

// y[m][r] for MB rows of x (x at `x`, row stride K) and one block of W; y at `y`, row stride N.
template <int MB>
inline void tile(const at::BFloat16* x, int64_t K, const at::BFloat16* block, const float* bias, at::BFloat16* y,
                 int64_t N) {
  __m512 acc[MB][kRows];
  for (int m = 0; m < MB; ++m)
    for (int r = 0; r < kRows; ++r) acc[m][r] = _mm512_setzero_ps();
  for (int64_t c = 0; c < K / kChunk; ++c) {
    const at::BFloat16* wc = block + c * kRows * kChunk;
    __m512bh xv[MB];
    for (int m = 0; m < MB; ++m) xv[m] = (__m512bh)_mm512_loadu_si512(x + m * K + c * kChunk);
    for (int r = 0; r < kRows; ++r) {
      const __m512bh wv = (__m512bh)_mm512_loadu_si512(wc + r * kChunk);
      for (int m = 0; m < MB; ++m) acc[m][r] = _mm512_dpbf16_ps(acc[m][r], xv[m], wv);
    }
  }
  for (int m = 0; m < MB; ++m)
    for (int r = 0; r < kRows; ++r)
      y[m * N + r] = c10::BFloat16(_mm512_reduce_add_ps(acc[m][r]) + (bias != nullptr ? bias[r] : 0.f));
}

void run(const at::BFloat16* x, const at::BFloat16* w, const float* bias, at::BFloat16* y, int64_t M, int64_t K,
         int64_t N) {
  for (int64_t m0 = 0; m0 < M; m0 += kRowTile) {
    const int64_t m1 = std::min(M, m0 + kRowTile);
    at::parallel_for(0, N / kRows, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t b = lo; b < hi; ++b) {
        const at::BFloat16* block = w + b * kRows * K;
        const float* bb = bias != nullptr ? bias + b * kRows : nullptr;
        at::BFloat16* yb = y + b * kRows;
        int64_t m = m0;
        for (; m + 3 <= m1; m += 3) tile<3>(x + m * K, K, block, bb, yb + m * N, N);
        if (m1 - m == 2) tile<2>(x + m * K, K, block, bb, yb + m * N, N);
        if (m1 - m == 1) tile<1>(x + m * K, K, block, bb, yb + m * N, N);
      }
    });
  }
}
#else
constexpr bool kBuilt = false;
void run(const at::BFloat16*, const at::BFloat16*, const float*, at::BFloat16*, int64_t, int64_t, int64_t) {}
#endif

}  // namespace

bool available() { return kBuilt; }

bool fits(int64_t out_features, int64_t in_features) {
  return out_features % kRows == 0 && in_features % kChunk == 0;
}

torch::Tensor pack(const torch::Tensor& w) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == at::kBFloat16, "w: an (out, in) bf16 matrix");
  const int64_t N = w.size(0), K = w.size(1);
  TORCH_CHECK(fits(N, K), "w: out a multiple of ", kRows, ", in a multiple of ", kChunk);
  return w.contiguous().view({N / kRows, kRows, K / kChunk, kChunk}).transpose(1, 2).contiguous().view({N, K});
}

torch::Tensor matmul(const torch::Tensor& x, const torch::Tensor& packed, const c10::optional<torch::Tensor>& bias) {
  TORCH_CHECK(kBuilt, "built without AVX512-BF16");
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && x.scalar_type() == at::kBFloat16, "x: contiguous (rows, in) bf16");
  TORCH_CHECK(packed.dim() == 2 && packed.is_contiguous() && packed.scalar_type() == at::kBFloat16 &&
              packed.size(1) == x.size(1) && fits(packed.size(0), packed.size(1)), "packed: pack()'s (out, in)");
  const int64_t M = x.size(0), K = x.size(1), N = packed.size(0);
  const float* bp = nullptr;
  if (bias.has_value()) {
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == N && bias->is_contiguous() &&
                bias->scalar_type() == at::kFloat, "bias: (out,) float32");
    bp = bias->data_ptr<float>();
  }
  auto y = torch::empty({M, N}, x.options());
  run(x.data_ptr<at::BFloat16>(), packed.data_ptr<at::BFloat16>(), bp, y.data_ptr<at::BFloat16>(), M, K, N);
  return y;
}

// Keeps the GIL: a call takes 10-300 us, and a release would let in a thread the engine thread then waits out.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("available", &available, "whether this build has the AVX512-BF16 path");
  m.def("fits", &fits, "whether an (out, in) matrix can be packed");
  m.def("pack", &pack, "W (out, in) -> the blocked copy matmul reads");
  m.def("matmul", &matmul, "x (rows, in) @ W^T + bias -> (rows, out) bf16", py::arg("x"), py::arg("packed"),
        py::arg("bias") = py::none());
}

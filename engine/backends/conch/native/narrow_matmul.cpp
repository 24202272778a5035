// y = x @ W^T (+ bias), bf16, over a copy of W laid out for this kernel: the Llama layers' matmuls.
//
// pack(w): W (N, K) -> the same values as [N/64][K/2][64][2]: groups of 64 output columns; per group, each
//   pair of input columns (2p, 2p + 1) holds the 64 columns' two weights side by side. A group's weights are
//   one contiguous run, read front to back once per pass.
// matmul(x, packed, bias): x (M, K) bf16, contiguous -> (M, N) bf16. Output column j of row m is one float32
//   sum in lane j % 16 of an accumulator: the pair products x[2p] w[2p][j] + x[2p+1] w[2p+1][j] added for
//   p = 0, 1, ... in order (AVX512-BF16's dot-product instruction), the bias added, rounded to bf16 once.
//   A row's result depends on its own values only, never on M, the tiling or the rows beside it (no
//   horizontal sums: the 16 lanes are 16 columns).
//
// Why: a decode step streams every weight once; oneDNN's packed matmul read SmolLM2-135M's 270 MB at
// ~16 GB/s for one row (15 ms a step on 2 cores); this reads them at ~40 GB/s in huge pages (6.5 ms). A tile
// of up to 6 rows x 64 columns keeps 24 accumulators in registers, so more rows reuse each weight load:
// 1.1-1.4x oneDNN's speed from 4 to 512 rows, 0.98x at 1,500 (measured on the model's 120 layer matrices).
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include "packed_product.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace {

constexpr int64_t kLanes = 16;               // output columns per 512-bit accumulator
constexpr int64_t kBlocks = 4;               // accumulators per row of x: a group of 64 output columns
constexpr int64_t kGroup = kLanes * kBlocks;
constexpr int64_t kRowTile = 192;            // rows of x per pass over W: 192 x K bf16 stay in L2

#if defined(__AVX512F__) && defined(__AVX512BF16__)
#include <immintrin.h>
constexpr bool kBuilt = true;

// y[m][0..63] for MB rows of x (row stride K) and one group of W (pack()'s [K/2][4][16][2]); y row stride N.
// Lane j of accumulator b sums column 16 b + j over the column pairs (2p, 2p + 1), p = 0, 1, ... in order.
template <int MB>
inline void tile(const at::BFloat16* x, int64_t K, const at::BFloat16* group, const float* bias, at::BFloat16* y,
                 int64_t N) {
  __m512 acc[MB][kBlocks];
  for (int m = 0; m < MB; ++m)
    for (int b = 0; b < kBlocks; ++b) acc[m][b] = _mm512_setzero_ps();
  for (int64_t p = 0; p < K / 2; ++p) {
    const at::BFloat16* wp = group + p * kGroup * 2;
    __m512bh w[kBlocks];
    for (int b = 0; b < kBlocks; ++b) w[b] = (__m512bh)_mm512_loadu_si512(wp + b * kLanes * 2);
    for (int m = 0; m < MB; ++m) {
      int32_t pair;
      std::memcpy(&pair, x + m * K + 2 * p, sizeof(pair));
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(pair);
      for (int b = 0; b < kBlocks; ++b) acc[m][b] = _mm512_dpbf16_ps(acc[m][b], xv, w[b]);
    }
  }
  for (int b = 0; b < kBlocks; ++b) {
    const __m512 bb = bias != nullptr ? _mm512_loadu_ps(bias + b * kLanes) : _mm512_setzero_ps();
    for (int m = 0; m < MB; ++m)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + m * N + b * kLanes),
                          (__m256i)_mm512_cvtneps_pbh(_mm512_add_ps(acc[m][b], bb)));
  }
}

using Tile = void (*)(const at::BFloat16*, int64_t, const at::BFloat16*, const float*, at::BFloat16*, int64_t);
constexpr Tile kTiles[] = {nullptr, tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>};
constexpr int64_t kMaxRows = 6;              // 6 x 4 accumulators + 4 weights + 1 broadcast: 29 of 32 registers

void run(const at::BFloat16* x, const at::BFloat16* w, const float* bias, at::BFloat16* y, int64_t M, int64_t K,
         int64_t N) {
  for (int64_t m0 = 0; m0 < M; m0 += kRowTile) {
    const int64_t m1 = std::min(M, m0 + kRowTile);
    at::parallel_for(0, N / kGroup, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t g = lo; g < hi; ++g) {
        const at::BFloat16* group = w + g * kGroup * K;
        const float* bg = bias != nullptr ? bias + g * kGroup : nullptr;
        for (int64_t m = m0; m < m1; m += kMaxRows) {
          const int64_t rows = std::min(kMaxRows, m1 - m);
          kTiles[rows](x + m * K, K, group, bg, y + m * N + g * kGroup, N);
        }
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
  return out_features % kGroup == 0 && in_features % 2 == 0;
}

torch::Tensor pack(const torch::Tensor& w) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == at::kBFloat16, "w: an (out, in) bf16 matrix");
  const int64_t N = w.size(0), K = w.size(1);
  TORCH_CHECK(fits(N, K), "w: out a multiple of ", kGroup, ", in a multiple of 2");
  // (N/64 groups, 64 columns, K/2 pairs, 2) -> (groups, K/2 pairs, 64 columns, 2)
  return w.contiguous().view({N / kGroup, kGroup, K / 2, 2}).transpose(1, 2).contiguous().view({N, K});
}

torch::Tensor matmul(const torch::Tensor& x, const torch::Tensor& packed, const c10::optional<torch::Tensor>& bias) {
  TORCH_CHECK(kBuilt, "built without AVX512-BF16");
  return packed_product::matmul(x, packed, bias, fits, run);
}

// packed_product.h: the GIL policy (a product of up to 16 rows keeps it) and the bindings.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  packed_product::bind(m, &available, &fits, &pack, &matmul, "whether this build has the AVX512-BF16 path",
                       "W (out, in) -> the blocked copy matmul reads");
}

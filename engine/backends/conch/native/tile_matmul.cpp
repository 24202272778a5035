// y = x @ W^T (+ bias), bf16, with AMX tiles (TMUL, `_tile_dpbf16ps`) over a copy of W in the VNNI pair layout.
//
// pack(w): W (N, K) -> the same values as [N/16][K/32][16][16][2]: per 16 output columns and 32 input columns, one
//   B tile (1 KB): tile row p holds, for the 16 columns, the weights of input columns 32 kb + 2p and 2p + 1 side
//   by side. A column block's tiles are one contiguous run over K.
// matmul(x, packed, bias): x (M, K) bf16, contiguous -> (M, N) bf16. Output (m, n) is one float32 sum in one
//   element of an accumulator tile: the tiles' products over k = 0..31, 32..63, ... in order (TDPBF16PS per
//   32 input columns), the bias added, rounded to bf16 once. TMUL computes each element of its destination from
//   its own row of A and column of B only, so a row's result depends on its own values: never on M, on which of a
//   tile's 16 rows it sits in, or on the rows beside it (a last, partial tile of rows is the rows copied beside
//   zeros, computed the same way).
//
// Why: each B tile loaded is applied to up to 32 rows (two A tiles x two B tiles, four accumulators), where the
// AVX512 kernel (narrow_matmul.cpp) applies a weight to at most 6 rows from registers.
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include "amx_tiles.h"
#include "packed_product.h"
#include "vector_exp.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

constexpr int64_t kTileRows = 16;            // rows of x per A tile, rows of a C tile
constexpr int64_t kTileCols = 16;            // output columns per B and C tile
constexpr int64_t kTileK = 32;               // input columns per A row and B tile (16 pairs)
constexpr int64_t kBlockN = 2 * kTileCols;   // columns per step: two B tiles
constexpr int64_t kBlockM = 2 * kTileRows;   // rows per step: two A tiles
constexpr int64_t kRowChunk = 256;           // rows of x per pass over a thread's weights: 256 x K bf16 stay in L2

#ifdef CONCH_AMX
constexpr bool kBuilt = true;
using amx_tiles::configure;
using amx_tiles::permitted;

// c (32 rows x 32 float32, row stride 32) = rows a0 (16 rows) and a1 (16 rows), row stride lda bytes, times the
// two column blocks b0, b1 (pack()'s tiles over K). TWO_A false: a1 is not read and c's rows 16..31 are not set.
template <bool TWO_A>
inline void block(const at::BFloat16* a0, const at::BFloat16* a1, int64_t lda, const at::BFloat16* b0,
                  const at::BFloat16* b1, int64_t K, float* c) {
  _tile_zero(0);
  _tile_zero(1);
  if (TWO_A) {
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t k = 0; k < K; k += kTileK) {
    const int64_t t = k * kTileCols;                    // this k's tile in a column block's run
    _tile_loadd(6, b0 + t, 64);
    _tile_loadd(7, b1 + t, 64);
    _tile_loadd(4, a0 + k, lda);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if (TWO_A) {
      _tile_loadd(5, a1 + k, lda);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  constexpr int64_t ldc = kBlockN * sizeof(float);
  _tile_stored(0, c, ldc);
  _tile_stored(1, c + kTileCols, ldc);
  if (TWO_A) {
    _tile_stored(2, c + kTileRows * kBlockN, ldc);
    _tile_stored(3, c + kTileRows * kBlockN + kTileCols, ldc);
  }
}

// y rows (row stride N) = c's first `rows` rows (32 columns each) + bias, rounded to bf16.
inline void store(const float* c, int64_t rows, const float* bias, at::BFloat16* y, int64_t N) {
  const __m512 b0 = bias != nullptr ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
  const __m512 b1 = bias != nullptr ? _mm512_loadu_ps(bias + kTileCols) : _mm512_setzero_ps();
  for (int64_t m = 0; m < rows; ++m) {
    const float* cm = c + m * kBlockN;
    __m256i* ym = reinterpret_cast<__m256i*>(y + m * N);
    _mm256_storeu_si256(ym, (__m256i)_mm512_cvtneps_pbh(_mm512_add_ps(_mm512_loadu_ps(cm), b0)));
    _mm256_storeu_si256(ym + 1, (__m256i)_mm512_cvtneps_pbh(_mm512_add_ps(_mm512_loadu_ps(cm + kTileCols), b1)));
  }
}

// GLU rows (row stride I) = silu(gate) * up of c's first `rows` rows, whose 32 columns are 16 gate columns then
// the same 16 up columns (pack_glu's order), rounded as vector_exp.h's silu_mul_bf16 rounds them.
inline void store_glu(const float* c, int64_t rows, at::BFloat16* y, int64_t I) {
  for (int64_t m = 0; m < rows; ++m) {
    const float* cm = c + m * kBlockN;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + m * I),
                        vector_exp::silu_mul_bf16(_mm512_loadu_ps(cm), _mm512_loadu_ps(cm + kTileCols)));
  }
}

// Rows [m0, m1) of x (full tiles read in place; the last partial tile from `tail`, its rows beside zeros) times
// column blocks [g0, g1). GLU: each block's 32 columns are 16 gate and 16 up columns, stored as 16 outputs of
// silu(gate) * up (y's row stride N / 2).
template <bool GLU>
void rows_by_blocks(const at::BFloat16* x, const at::BFloat16* tail, int64_t full, const at::BFloat16* w,
                    const float* bias, at::BFloat16* y, int64_t M, int64_t K, int64_t N, int64_t m0, int64_t m1,
                    int64_t g0, int64_t g1) {
  alignas(64) float c[kBlockM * kBlockN];
  const int64_t lda = K * sizeof(at::BFloat16);
  auto a = [&](int64_t m) { return m < full ? x + m * K : tail + (m - full) * K; };
  for (int64_t g = g0; g < g1; ++g) {
    const at::BFloat16* b0 = w + g * kBlockN * K;
    const at::BFloat16* b1 = b0 + kTileCols * K;
    const float* bg = bias != nullptr ? bias + g * kBlockN : nullptr;
    for (int64_t m = m0; m < m1; m += kBlockM) {
      const int64_t rows = std::min(kBlockM, m1 - m);
      if (rows > kTileRows)
        block<true>(a(m), a(m + kTileRows), lda, b0, b1, K, c);
      else
        block<false>(a(m), nullptr, lda, b0, b1, K, c);
      if (GLU)
        store_glu(c, rows, y + m * (N / 2) + g * kTileCols, N / 2);
      else
        store(c, rows, bg, y + m * N + g * kBlockN, N);
    }
  }
}

template <bool GLU>
void run(const at::BFloat16* x, const at::BFloat16* w, const float* bias, at::BFloat16* y, int64_t M, int64_t K,
         int64_t N) {
  const int64_t full = M / kTileRows * kTileRows;     // rows read in place; the rest from a zero-padded copy
  std::vector<at::BFloat16> tail(kTileRows * K, at::BFloat16(0.0f));
  std::memcpy(tail.data(), x + full * K, (M - full) * K * sizeof(at::BFloat16));
  at::parallel_for(0, N / kBlockN, 1, [&](int64_t lo, int64_t hi) {
    configure();
    for (int64_t m0 = 0; m0 < M; m0 += kRowChunk)
      rows_by_blocks<GLU>(x, tail.data(), full, w, bias, y, M, K, N, m0, std::min(M, m0 + kRowChunk), lo, hi);
    _tile_release();
  });
}
#else
constexpr bool kBuilt = false;
bool permitted() { return false; }
template <bool GLU>
void run(const at::BFloat16*, const at::BFloat16*, const float*, at::BFloat16*, int64_t, int64_t, int64_t) {}
#endif

}  // namespace

bool available() { return kBuilt && permitted(); }

bool fits(int64_t out_features, int64_t in_features) {
  return out_features % kBlockN == 0 && in_features % kTileK == 0;
}

torch::Tensor pack(const torch::Tensor& w) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == at::kBFloat16, "w: an (out, in) bf16 matrix");
  const int64_t N = w.size(0), K = w.size(1);
  TORCH_CHECK(fits(N, K), "w: out a multiple of ", kBlockN, ", in a multiple of ", kTileK);
  // (N/16 blocks, 16 columns, K/32, 16 pairs, 2) -> (blocks, K/32, 16 pairs, 16 columns, 2)
  return w.contiguous().view({N / kTileCols, kTileCols, K / kTileK, kTileK / 2, 2}).permute({0, 2, 3, 1, 4})
      .contiguous().view({N, K});
}

torch::Tensor matmul(const torch::Tensor& x, const torch::Tensor& packed, const c10::optional<torch::Tensor>& bias) {
  TORCH_CHECK(available(), amx_tiles::kMissing);
  return packed_product::matmul(x, packed, bias, fits, run<false>);
}

// pack_glu(w): w (2 I, in) = [gate; up] (an MLP's fused gate_up rows) -> pack() of its rows reordered so that each
//   32-column block is 16 gate rows then the same 16 up rows.
torch::Tensor pack_glu(const torch::Tensor& w) {
  TORCH_CHECK(w.dim() == 2 && w.size(0) % kBlockN == 0, "w: (2 I, in) with I a multiple of ", kTileCols);
  const int64_t I = w.size(0) / 2;
  return pack(w.contiguous().view({2, I / kTileCols, kTileCols, w.size(1)}).transpose(0, 1).reshape({2 * I, w.size(1)}));
}

// matmul_glu(x, packed): x (M, in) -> silu(x gate^T) * (x up^T), (M, I) bf16, from pack_glu's copy: the product and
//   fused_ops.cpp's silu_mul in one pass with its roundings (store_glu; its exponential is vector_exp's, so a rare
//   element differs by a bf16 step), the (M, 2 I) product never written. Rows stay independent.
torch::Tensor matmul_glu(const torch::Tensor& x, const torch::Tensor& packed) {
  TORCH_CHECK(available(), amx_tiles::kMissing);
  return packed_product::matmul(x, packed, c10::nullopt, fits, run<true>, 2);
}

// packed_product.h: the GIL policy (a product of up to 16 rows keeps it) and the bindings.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  packed_product::bind(m, &available, &fits, &pack, &matmul, "whether this build and this process can use AMX tiles",
                       "W (out, in) -> the VNNI tile copy matmul reads");
  packed_product::bind_glu(m, &pack_glu, &matmul_glu);
}

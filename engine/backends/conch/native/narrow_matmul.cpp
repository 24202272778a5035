// y = x @ W^T (+ bias), bf16, over a copy of W laid out for this kernel: the Llama layers' matmuls.
//
// pack(w): W (N, K), N a multiple of 16 -> the same values as groups of 48 output columns, [N/48][K/2][48][2],
//   then the last N % 48 columns (16 or 32) as one narrower group, [K/2][N % 48][2]: per group, each pair of
//   input columns (2p, 2p + 1) holds the group's columns' two weights side by side. A group's weights are one
//   contiguous run, read front to back once per pass.
// matmul(x, packed, bias): x (M, K) bf16, contiguous -> (M, N) bf16. Output column j of row m is one float32
//   sum in one lane of an accumulator: the pair products x[2p] w[2p][j] + x[2p+1] w[2p+1][j] added for
//   p = 0, 1, ... in order (AVX512-BF16's dot-product instruction), the bias added, rounded to bf16 once.
//   A row's result depends on its own values only, never on M, the tiling or the rows beside it (no
//   horizontal sums: the 16 lanes are 16 columns).
// pack_glu(w) / matmul_glu(x, packed): an MLP's gate_up rows [gate; up] (2 I, K) as groups of 32 columns, 16 gate
//   columns then the same 16 up columns, [2I/32][K/2][32][2]; the product is silu(gate) * up (M, I), rounded as
//   vector_exp.h's silu_mul_bf16 rounds it, the (M, 2 I) product never written. Each sum as matmul's.
//
// Why: a decode step streams every weight once; oneDNN's packed matmul read SmolLM2-135M's 270 MB at
// ~16 GB/s for one row (15 ms a step on 2 cores); this reads them at ~40 GB/s in huge pages (6.5 ms). A tile
// keeps up to 24 accumulators in registers, so more rows reuse each weight load: up to 8 rows x 3 blocks of 16
// columns (one group, one stream of weights a thread; the tile shapes measured: docs/performance-journal.md).
// Where a row tile takes more than one pass over a group (more rows than a tile holds), the first pass brings
// the next group into L2 as it goes (`ahead`): left to the hardware's prefetchers, the next group's first lines
// were not in cache when its pass began. Timing only: no value changes.
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include "packed_product.h"
#include "vector_exp.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

namespace {

constexpr int64_t kLanes = 16;               // output columns per 512-bit accumulator
constexpr int64_t kBlocks = 3;               // accumulators per row of x in a group: 48 output columns
constexpr int64_t kGroup = kLanes * kBlocks;
constexpr int64_t kRowTile = 192;            // rows of x per pass over W: 192 x K bf16 stay in L2
constexpr int64_t kMaxRows = 8;              // 8 x 3 accumulators + 3 weights + 1 broadcast: 28 of 32 registers

#if defined(__AVX512F__) && defined(__AVX512BF16__)
#include <immintrin.h>

#include "prefetch.h"
constexpr bool kBuilt = true;

// Block b (16 columns) of pair p in a group from `w` in pack()'s layout: a whole group's 3 blocks, or the
// narrower last group's 1 or 2 (kNarrow: its pairs are 16 NB wide)
template <int NB, bool kNarrow>
inline const at::BFloat16* block(const at::BFloat16* w, int64_t p, int b) {
  return w + p * 2 * (kNarrow ? kLanes * NB : kGroup) + b * 2 * kLanes;
}

// y[m][c0 ..] for MB rows of x (row stride K) over NB blocks from w (block()); y row stride N. `ahead`: where
// given, the next whole group, brought into L2 pair by pair.
// Lane j of accumulator b sums column c0 + 16 b + j over the column pairs (2p, 2p + 1), p = 0, 1, ... in order.
template <int MB, int NB, bool kNarrow>
void tile(const at::BFloat16* x, int64_t K, const at::BFloat16* w, const float* bias, at::BFloat16* y, int64_t N,
          const at::BFloat16* ahead) {
  __m512 acc[MB][NB];
  for (int m = 0; m < MB; ++m)
    for (int b = 0; b < NB; ++b) acc[m][b] = _mm512_setzero_ps();
  for (int64_t p = 0; p < K / 2; ++p) {
    if (ahead != nullptr) prefetch::bring(ahead + p * 2 * kGroup, 2 * kGroup * sizeof(at::BFloat16));
    __m512bh wv[NB];
    for (int b = 0; b < NB; ++b) wv[b] = (__m512bh)_mm512_loadu_si512(block<NB, kNarrow>(w, p, b));
    for (int m = 0; m < MB; ++m) {
      int32_t pair;
      std::memcpy(&pair, x + m * K + 2 * p, sizeof(pair));
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(pair);
      for (int b = 0; b < NB; ++b) acc[m][b] = _mm512_dpbf16_ps(acc[m][b], xv, wv[b]);
    }
  }
  for (int b = 0; b < NB; ++b) {
    const __m512 bb = bias != nullptr ? _mm512_loadu_ps(bias + b * kLanes) : _mm512_setzero_ps();
    for (int m = 0; m < MB; ++m)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + m * N + b * kLanes),
                          (__m256i)_mm512_cvtneps_pbh(_mm512_add_ps(acc[m][b], bb)));
  }
}

using Tile = void (*)(const at::BFloat16*, int64_t, const at::BFloat16*, const float*, at::BFloat16*, int64_t,
                     const at::BFloat16*);

// [rows]: the tile of that many rows, 1 .. kMaxRows
template <int NB, bool kNarrow, int... MB>
constexpr std::array<Tile, kMaxRows + 1> tiles(std::integer_sequence<int, MB...>) {
  return {nullptr, tile<MB + 1, NB, kNarrow>...};
}
constexpr auto kRows = std::make_integer_sequence<int, kMaxRows>{};
// a group's tiles; the narrower last group's, of 1 or 2 blocks
constexpr std::array<Tile, kMaxRows + 1> kGroupTiles = tiles<kBlocks, false>(kRows);
constexpr std::array<Tile, kMaxRows + 1> kNarrowTiles[] = {{}, tiles<1, true>(kRows), tiles<2, true>(kRows)};

// Group i of W (N, K): its first column, where its weights start, and its tiles (i = N / 48: the narrower last)
struct Span {
  int64_t c0;
  const at::BFloat16* w;
  const std::array<Tile, kMaxRows + 1>* tiles;   // by rows
};

Span span_of(const at::BFloat16* w, int64_t K, int64_t N, int64_t i) {
  const int64_t whole = N / kGroup;
  return {i * kGroup, w + i * kGroup * K, i < whole ? &kGroupTiles : &kNarrowTiles[N % kGroup / kLanes]};
}

void run(const at::BFloat16* x, const at::BFloat16* w, const float* bias, at::BFloat16* y, int64_t M, int64_t K,
         int64_t N) {
  const int64_t groups = (N + kGroup - 1) / kGroup;
  for (int64_t m0 = 0; m0 < M; m0 += kRowTile) {
    const int64_t m1 = std::min(M, m0 + kRowTile);
    at::parallel_for(0, groups, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const Span s = span_of(w, K, N, i);
        const float* bs = bias != nullptr ? bias + s.c0 : nullptr;
        // two passes or more over this group: the first brings the next whole group of this thread's in
        const bool whole_next = i + 1 < hi && i + 1 < N / kGroup;
        const at::BFloat16* ahead = m1 - m0 > kMaxRows && whole_next ? s.w + kGroup * K : nullptr;
        for (int64_t m = m0; m < m1; m += kMaxRows, ahead = nullptr)
          (*s.tiles)[std::min(kMaxRows, m1 - m)](x + m * K, K, s.w, bs, y + m * N + s.c0, N, ahead);
      }
    });
  }
}
// ---- GLU: groups of 2 blocks (16 gate columns, the same 16 up columns), up to kGluRows rows a tile ----

constexpr int64_t kGluGroup = 2 * kLanes;
constexpr int64_t kGluRows = 12;             // 12 x 2 accumulators + 2 weights + 1 broadcast: 27 registers

// y[m][c0 .. c0 + 15] = silu(gate) * up for MB rows of x over one GLU group `w`; y row stride I (vector_exp.h's
// silu_mul_bf16 roundings). `ahead`: as tile's.
template <int MB>
void tile_glu(const at::BFloat16* x, int64_t K, const at::BFloat16* w, at::BFloat16* y, int64_t I,
              const at::BFloat16* ahead) {
  __m512 acc[MB][2];
  for (int m = 0; m < MB; ++m) acc[m][0] = acc[m][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < K / 2; ++p) {
    if (ahead != nullptr) prefetch::bring(ahead + p * 2 * kGluGroup, 2 * kGluGroup * sizeof(at::BFloat16));
    const __m512bh gate = (__m512bh)_mm512_loadu_si512(w + p * 2 * kGluGroup);
    const __m512bh up = (__m512bh)_mm512_loadu_si512(w + p * 2 * kGluGroup + 2 * kLanes);
    for (int m = 0; m < MB; ++m) {
      int32_t pair;
      std::memcpy(&pair, x + m * K + 2 * p, sizeof(pair));
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(pair);
      acc[m][0] = _mm512_dpbf16_ps(acc[m][0], xv, gate);
      acc[m][1] = _mm512_dpbf16_ps(acc[m][1], xv, up);
    }
  }
  for (int m = 0; m < MB; ++m)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + m * I), vector_exp::silu_mul_bf16(acc[m][0], acc[m][1]));
}

using GluTile = void (*)(const at::BFloat16*, int64_t, const at::BFloat16*, at::BFloat16*, int64_t,
                        const at::BFloat16*);

template <int... MB>
constexpr std::array<GluTile, kGluRows + 1> glu_tiles(std::integer_sequence<int, MB...>) {
  return {nullptr, tile_glu<MB + 1>...};
}
constexpr std::array<GluTile, kGluRows + 1> kGluTiles = glu_tiles(std::make_integer_sequence<int, kGluRows>{});

// N = 2 I columns of pack_glu's groups; y (M, I)
void run_glu(const at::BFloat16* x, const at::BFloat16* w, const float*, at::BFloat16* y, int64_t M, int64_t K,
             int64_t N) {
  const int64_t I = N / 2;
  for (int64_t m0 = 0; m0 < M; m0 += kRowTile) {
    const int64_t m1 = std::min(M, m0 + kRowTile);
    at::parallel_for(0, N / kGluGroup, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const at::BFloat16* ahead = m1 - m0 > kGluRows && i + 1 < hi ? w + (i + 1) * kGluGroup * K : nullptr;
        for (int64_t m = m0; m < m1; m += kGluRows, ahead = nullptr)
          kGluTiles[std::min(kGluRows, m1 - m)](x + m * K, K, w + i * kGluGroup * K, y + m * I + i * kLanes, I,
                                                ahead);
      }
    });
  }
}
#else
constexpr bool kBuilt = false;
void run(const at::BFloat16*, const at::BFloat16*, const float*, at::BFloat16*, int64_t, int64_t, int64_t) {}
void run_glu(const at::BFloat16*, const at::BFloat16*, const float*, at::BFloat16*, int64_t, int64_t, int64_t) {}
#endif

}  // namespace

bool available() { return kBuilt; }

bool fits(int64_t out_features, int64_t in_features) {
  return out_features % kLanes == 0 && in_features % 2 == 0;
}

torch::Tensor pack(const torch::Tensor& w) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == at::kBFloat16, "w: an (out, in) bf16 matrix");
  const int64_t N = w.size(0), K = w.size(1), whole = N / kGroup * kGroup;
  TORCH_CHECK(fits(N, K), "w: out a multiple of ", kLanes, ", in a multiple of 2");
  const torch::Tensor c = w.contiguous();
  // (N/48 groups, 48 columns, K/2 pairs, 2) -> (groups, K/2 pairs, 48 columns, 2); the rest (r, K/2, 2) -> (K/2, r, 2)
  const torch::Tensor groups = c.narrow(0, 0, whole).view({whole / kGroup, kGroup, K / 2, 2}).transpose(1, 2);
  const torch::Tensor rest = c.narrow(0, whole, N - whole).view({N - whole, K / 2, 2}).transpose(0, 1);
  return torch::cat({groups.contiguous().view({-1}), rest.contiguous().view({-1})}).view({N, K});
}

torch::Tensor matmul(const torch::Tensor& x, const torch::Tensor& packed, const c10::optional<torch::Tensor>& bias) {
  TORCH_CHECK(kBuilt, "built without AVX512-BF16");
  return packed_product::matmul(x, packed, bias, fits, run);
}

bool fits_glu(int64_t out_features, int64_t in_features) {
  return out_features % (2 * kLanes) == 0 && in_features % 2 == 0;
}

// (2 I, K) [gate; up] -> each 32 rows 16 gate then the same 16 up rows, as groups of 32: (2I/32, K/2, 32, 2)
torch::Tensor pack_glu(const torch::Tensor& w) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == at::kBFloat16 && fits_glu(w.size(0), w.size(1)),
              "w: a (2 I, in) bf16 [gate; up], I a multiple of ", kLanes, ", in of 2");
  const int64_t N = w.size(0), K = w.size(1), I = N / 2;
  const torch::Tensor rows = w.contiguous().view({2, I / kLanes, kLanes, K}).transpose(0, 1).reshape({N, K});
  return rows.view({N / (2 * kLanes), 2 * kLanes, K / 2, 2}).transpose(1, 2).contiguous().view({N, K});
}

torch::Tensor matmul_glu(const torch::Tensor& x, const torch::Tensor& packed) {
  TORCH_CHECK(kBuilt, "built without AVX512-BF16");
  return packed_product::matmul(x, packed, c10::nullopt, fits_glu, run_glu, 2);
}

// packed_product.h: the GIL policy (a product of up to 16 rows keeps it) and the bindings.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  packed_product::bind(m, &available, &fits, &pack, &matmul, "whether this build has the AVX512-BF16 path",
                       "W (out, in) -> the blocked copy matmul reads");
  packed_product::bind_glu(m, &pack_glu, &matmul_glu);
}

// Causal attention of one prefill chunk (and of batched decode rows) over Conch's slot KV store, bf16, head_dim
// 64 or 128, with AMX tiles: the path of a CPU with AMX (prefill_attention.cpp is the AVX512-BF16 one, with the
// same layout, checks, task split and bindings: attention_blocks.h).
//
// One task's query rows (up to kTokens tokens x R heads of one kv head) are copied into 16-row tiles; per key
// block of 64: S = Q K^T as four 16 x 16 float32 C tiles (TDPBF16PS over d in 32-wide steps, in order), the
// online softmax per row in AVX512 registers (attention_blocks.h's, shared with the vector kernel), then
// PV = P V as C tiles (over the block's keys in two 32-wide steps, in order) and o = o x correction + PV per row.
// The packed and blocked K layout ([D/2][64 keys][2]) is the B tile of Q K^T as it lies (row stride 256 bytes),
// the V layout ([32 key pairs][D][2]) the B tile of P V (row stride 4 D bytes): nothing is repacked.
//
// Exactness: TMUL computes each element of its destination from its own row of A and column of B only, so a
// query row's scores, probabilities and output depend on its own query, its position and its slot's keys: never
// on the tile row it sits in, the rows beside it or the entry (chunk or decode rows) that computed it. A row
// before a block's first key (a tile's leading rows in a causal chunk) gets probabilities 0 and correction 1:
// its output is unchanged bit for bit, as the vector kernel leaves it. Rows padding the last tile are zeros with
// probabilities 0: their scores are computed and dropped.
#include "amx_tiles.h"
#include "attention_blocks.h"

namespace {

using attention_blocks::first_live;
using attention_blocks::kKeys;
using attention_blocks::row_offset;
using attention_blocks::write_rows;

constexpr int64_t kRows = 16;              // query rows per tile

#ifdef CONCH_AMX
constexpr bool kBuilt = true;
using attention_blocks::softmax_block;

// C tiles 0-3 += A tile 4 times the four B tiles of 16 columns (32 bf16) side by side at b, row stride `stride`
// bytes: 64 output columns from 16 pairs of the inner dimension, each column's sum over the pairs in order.
inline void times_four(const uint16_t* b, int64_t stride) {
  _tile_loadd(5, b, stride);
  _tile_dpbf16ps(0, 4, 5);
  _tile_loadd(6, b + 32, stride);
  _tile_dpbf16ps(1, 4, 6);
  _tile_loadd(5, b + 64, stride);
  _tile_dpbf16ps(2, 4, 5);
  _tile_loadd(6, b + 96, stride);
  _tile_dpbf16ps(3, 4, 6);
}

// s (16 rows x 64 keys float32, row stride 64) = the 16 query rows qt (row stride D) . key block kb.
template <int D>
inline void scores(const uint16_t* qt, const uint16_t* kb, float* s) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int kk = 0; kk < D / 32; ++kk) {
    _tile_loadd(4, qt + kk * 32, D * 2);
    times_four(kb + kk * 16 * 2 * kKeys, 4 * kKeys);    // d pairs 16 kk .. 16 kk + 15, every key of the block
  }
  _tile_stored(0, s, 4 * kKeys);
  _tile_stored(1, s + 16, 4 * kKeys);
  _tile_stored(2, s + 32, 4 * kKeys);
  _tile_stored(3, s + 48, 4 * kKeys);
}

// o (the first `live` of 16 rows x D float32) = o x corr + pt (16 rows x 64 bf16 probabilities) . value block vb;
// pv: 16 x 64 floats of scratch.
template <int D>
inline void values(const uint16_t* pt, const uint16_t* vb, const float* corr, int64_t live, float* o, float* pv) {
  for (int dg = 0; dg < D / 64; ++dg) {                 // 64 output columns at a time: four C tiles
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int kk = 0; kk < 2; ++kk) {                    // keys 32 kk .. 32 kk + 31: 16 key pairs
      _tile_loadd(4, pt + kk * 32, 2 * kKeys);
      times_four(vb + kk * 16 * 2 * D + dg * 64 * 2, 4 * D);
    }
    _tile_stored(0, pv, 4 * 64);
    _tile_stored(1, pv + 16, 4 * 64);
    _tile_stored(2, pv + 32, 4 * 64);
    _tile_stored(3, pv + 48, 4 * 64);
    for (int64_t r = 0; r < live; ++r) {
      const __m512 c = _mm512_set1_ps(corr[r]);
      float* orow = o + r * D + dg * 64;
      for (int j = 0; j < 4; ++j)
        _mm512_storeu_ps(orow + 16 * j, _mm512_fmadd_ps(_mm512_loadu_ps(orow + 16 * j), c,
                                                        _mm512_loadu_ps(pv + r * 64 + 16 * j)));
    }
  }
}

// A thread's scratch, kept between tasks (a decode step runs thousands of small ones).
struct Scratch {
  std::vector<uint16_t> q, p;
  std::vector<float> s, o, pv, corr, top, sum;
  std::vector<int64_t> position;

  void size(int64_t rows, int64_t D) {
    q.assign(rows * D, 0);
    p.assign(rows * kKeys, 0);
    s.resize(rows * kKeys);
    o.assign(rows * D, 0.f);
    pv.resize(kRows * 64);
    corr.assign(rows, 1.f);
    top.assign(rows, -std::numeric_limits<float>::infinity());
    sum.assign(rows, 0.f);
    position.resize(rows);
  }
};

// One task: up to kTokens query tokens (M = tokens x R rows) of kv head g against packed K/V blocks 0..last.
template <int D>
__attribute__((noinline))
void attend_block(const uint16_t* q, int64_t q_stride, int64_t t0, int64_t tokens, int64_t g, int64_t R,
                  int64_t start, const uint16_t* kp, const uint16_t* vp, float scale, c10::BFloat16* out,
                  int64_t H) {
  thread_local Scratch w;
  const int64_t M = tokens * R, tiles = (M + kRows - 1) / kRows;
  w.size(tiles * kRows, D);
  for (int64_t m = 0; m < tiles * kRows; ++m) {
    w.position[m] = start + t0 + std::min(m, M - 1) / R;
    if (m < M) std::memcpy(w.q.data() + m * D, q + row_offset(m, t0, q_stride, g, R, D), D * sizeof(uint16_t));
  }
  const float log2e_scale = scale * 1.4426950408889634f;
  const int64_t blocks = w.position[M - 1] / kKeys + 1;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t first = b * kKeys;
    for (int64_t i = first_live(w.position.data(), first) / kRows; i < tiles; ++i) {
      const int64_t r0 = i * kRows;
      scores<D>(w.q.data() + r0 * D, kp + b * kKeys * D, w.s.data() + r0 * kKeys);
      const int64_t live = std::min(kRows, M - r0);    // the padding rows' probabilities stay 0, their o unused
      for (int64_t m = r0; m < r0 + live; ++m)
        softmax_block(w.s.data() + m * kKeys, w.position[m] - first + 1, log2e_scale, w.top[m], w.sum[m],
                      w.p.data() + m * kKeys, w.corr[m]);
      values<D>(w.p.data() + r0 * kKeys, vp + b * kKeys * D, w.corr.data() + r0, live, w.o.data() + r0 * D,
                w.pv.data());
    }
  }
  write_rows(w.o.data(), w.sum.data(), M, t0, g, R, H, D, out);
}

void tiles_begin() { amx_tiles::configure(); }
void tiles_end() { _tile_release(); }
#else
constexpr bool kBuilt = false;
template <int D>
void attend_block(const uint16_t*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const uint16_t*,
                  const uint16_t*, float, c10::BFloat16*, int64_t) {}
void tiles_begin() {}
void tiles_end() {}
#endif

struct Tiles {
  static constexpr const char* kMissing = amx_tiles::kMissing;
#ifdef CONCH_AMX
  static bool available() { return kBuilt && amx_tiles::permitted(); }
#else
  static bool available() { return false; }
#endif
  static void begin() { tiles_begin(); }
  static void end() { tiles_end(); }
  static constexpr auto attend64 = &attend_block<64>;
  static constexpr auto attend128 = &attend_block<128>;
};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { attention_blocks::bind<Tiles>(m); }

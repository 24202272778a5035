// y = x @ W^T for W held in a GGUF's quantized blocks, read in place (no dequantized copy of W).
//
// matmul(x, blocks, qtype, K): x (M, K) bf16 or float32, contiguous; blocks (N, row_bytes) uint8: row n of W
//   as the file stores it (K / QK blocks of ggml's layout); qtype: ggml's type number (Q4_0 2, Q4_1 3, Q8_0 8,
//   Q4_K 12, Q5_K 13, Q6_K 14) -> (M, N) in x's dtype.
// Arithmetic: for each output column n, each block of W's row n is dequantized once into float32 registers
//   (QK values: 32, or 256 for the K-quants) and dotted with every row of x; a row's sum is the blocks' dots
//   added in block order, each dot one fixed-order float32 reduction. So y[m][n] depends on x's row m and W
//   only, never on M or the rows beside it: batch-invariant by construction.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

inline float half(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return _cvtsh_ss(bits);
}

// ggml's get_scale_min_k4: sub-block j's 6-bit scale and min from a K-quant's 12 packed bytes
inline void scale_min(int j, const uint8_t* q, float* sc, float* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void q8_0(const uint8_t* b, float* y) {
  const float d = half(b);
  const int8_t* q = reinterpret_cast<const int8_t*>(b + 2);
  for (int i = 0; i < 32; ++i) y[i] = d * q[i];
}

void q4_0(const uint8_t* b, float* y) {
  const float d = half(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = ((b[2 + j] & 0xF) - 8) * d;
    y[j + 16] = ((b[2 + j] >> 4) - 8) * d;
  }
}

void q4_1(const uint8_t* b, float* y) {
  const float d = half(b), m = half(b + 2);
  for (int j = 0; j < 16; ++j) {
    y[j] = (b[4 + j] & 0xF) * d + m;
    y[j + 16] = (b[4 + j] >> 4) * d + m;
  }
}

void q4_k(const uint8_t* b, float* y) {
  const float d = half(b), dmin = half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
    float sc1, m1, sc2, m2;
    scale_min(is, scales, &sc1, &m1);
    scale_min(is + 1, scales, &sc2, &m2);
    for (int l = 0; l < 32; ++l) y[j + l] = d * sc1 * (q[l] & 0xF) - dmin * m1;
    for (int l = 0; l < 32; ++l) y[j + 32 + l] = d * sc2 * (q[l] >> 4) - dmin * m2;
  }
}

void q5_k(const uint8_t* b, float* y) {
  const float d = half(b), dmin = half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* q = b + 48;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32, u1 <<= 2, u2 <<= 2) {
    float sc1, m1, sc2, m2;
    scale_min(is, scales, &sc1, &m1);
    scale_min(is + 1, scales, &sc2, &m2);
    for (int l = 0; l < 32; ++l) y[j + l] = d * sc1 * ((q[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - dmin * m1;
    for (int l = 0; l < 32; ++l) y[j + 32 + l] = d * sc2 * ((q[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - dmin * m2;
  }
}

void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half(b + 208);
  for (int n = 0; n < 256; n += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      y[n + l] = d * sc[is] * (((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
      y[n + l + 32] = d * sc[is + 2] * (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
      y[n + l + 64] = d * sc[is + 4] * (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      y[n + l + 96] = d * sc[is + 6] * (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}

struct Type {
  int qk;               // values a block holds
  int bytes;            // its size in the file
  void (*dequant)(const uint8_t*, float*);
};

bool lookup(int64_t qtype, Type* t) {
  switch (qtype) {
    case 2: *t = {32, 18, q4_0}; return true;
    case 3: *t = {32, 20, q4_1}; return true;
    case 8: *t = {32, 34, q8_0}; return true;
    case 12: *t = {256, 144, q4_k}; return true;
    case 13: *t = {256, 176, q5_k}; return true;
    case 14: *t = {256, 210, q6_k}; return true;
    default: return false;
  }
}

// one block's dot with x's values under it: 16-lane float32 partial sums, then the lanes in a fixed order
inline float dot(const float* w, const float* x, int n) {
  __m512 acc = _mm512_setzero_ps();
  for (int i = 0; i < n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), acc);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc);
  float s = 0.f;
  for (int i = 0; i < 16; ++i) s += lanes[i];
  return s;
}

bool supported(int64_t qtype) {
  Type t;
  return lookup(qtype, &t);
}

torch::Tensor dequantize(const torch::Tensor& blocks, int64_t qtype, int64_t K) {
  Type t;
  TORCH_CHECK(lookup(qtype, &t), "quant_matmul: ggml type ", qtype, " is not supported");
  const int64_t N = blocks.size(0), nb = K / t.qk;
  auto out = torch::empty({N, K}, torch::kFloat32);
  const uint8_t* w = blocks.data_ptr<uint8_t>();
  float* y = out.data_ptr<float>();
  at::parallel_for(0, N, 16, [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n)
      for (int64_t b = 0; b < nb; ++b) t.dequant(w + n * blocks.size(1) + b * t.bytes, y + n * K + b * t.qk);
  });
  return out;
}

torch::Tensor matmul(const torch::Tensor& x, const torch::Tensor& blocks, int64_t qtype, int64_t K) {
  Type t;
  TORCH_CHECK(lookup(qtype, &t), "quant_matmul: ggml type ", qtype, " is not supported");
  TORCH_CHECK(x.dim() == 2 && x.size(1) == K && K % t.qk == 0, "quant_matmul: x must be (M, K), K a multiple of ",
              t.qk);
  TORCH_CHECK(blocks.dtype() == torch::kUInt8 && blocks.dim() == 2 && blocks.size(1) == K / t.qk * t.bytes,
              "quant_matmul: blocks must be (N, K / QK * block bytes) uint8");
  const int64_t M = x.size(0), N = blocks.size(0), nb = K / t.qk, row_bytes = blocks.size(1);
  const torch::Tensor xf = x.to(torch::kFloat32).contiguous();
  auto out = torch::empty({M, N}, torch::kFloat32);
  const float* xs = xf.data_ptr<float>();
  const uint8_t* w = blocks.data_ptr<uint8_t>();
  float* y = out.data_ptr<float>();
  {
    pybind11::gil_scoped_release unlocked;
    at::parallel_for(0, N, 8, [&](int64_t lo, int64_t hi) {
      alignas(64) float deq[256];
      std::vector<float> acc(M);
      for (int64_t n = lo; n < hi; ++n) {
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int64_t b = 0; b < nb; ++b) {
          t.dequant(w + n * row_bytes + b * t.bytes, deq);
          for (int64_t m = 0; m < M; ++m) acc[m] += dot(deq, xs + m * K + b * t.qk, t.qk);
        }
        for (int64_t m = 0; m < M; ++m) y[m * N + n] = acc[m];
      }
    });
  }
  return x.scalar_type() == torch::kFloat32 ? out : out.to(x.scalar_type());
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("supported", &supported, "whether this ggml type has a kernel");
  m.def("dequantize", &dequantize, "blocks (N, row bytes) -> W (N, K) float32 (the reference's values)");
  m.def("matmul", &matmul, "x (M, K) @ W^T for W in ggml blocks -> (M, N) in x's dtype", py::arg("x"),
        py::arg("blocks"), py::arg("qtype"), py::arg("K"));
}

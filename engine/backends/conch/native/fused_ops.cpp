// The Llama layer's elementwise ops, fused, bf16: each reads its rows once instead of through five torch ops
// that convert to float and back.
//
// add_rms_norm(x, delta, weight, eps): x += delta in place (the residual stream, rounded to bf16 as torch's
//   bf16 add rounds), returns rms_norm(x) * weight: per row in float32, x / sqrt(mean(x^2) + eps) rounded to
//   bf16, times the weight, rounded again (HF's LlamaRMSNorm order).
// head_rms_norm(qkv, first, heads, D, weight, eps): in place, each of `heads` heads of D values from head
//   `first` of every row of qkv (T, width) normed as add_rms_norm's rows (Qwen3's and Gemma 3's q/k norms).
// silu_mul(h): h (T, 2I) = [gate | up] -> silu(gate) * up (T, I), silu rounded to bf16 before the product
//   (torch's F.silu(gate) * up).
// rope_store(qkv, rotation, positions, rows, k, v): a step's q/k rotated, its K/V written into a layer's store.
//   qkv (T, (H + 2G) D): per token H query heads, G key heads (each in RoPE pairs (2i, 2i + 1), weights.py's
//   order), G value heads; rotation (P, D/2, 2) float32 (cos, sin) per position; positions (T,); rows (T G,)
//   the store rows (SlotKVStore.rows) of each token's kv heads in k, v (slots, G, capacity, D). Each pair is
//   rotated in float32, (a cos - b sin, a sin + b cos), rounded to bf16; returns q (T, H, D); the keys and the
//   values go to k and v at `rows` (row = (slot G + kv head) capacity + column), as plain rows of D, or with
//   `blocked` into the region's 64-key blocks (SlotKVStore's blocked layout, prefill_attention.cpp's
//   packing; test_blocked_store.py holds the three spellings of that layout to each other). One call
//   replaces ~10 torch ops a layer (casts, a complex multiply, two index copies).
// Rows are independent and computed in a fixed order: a row's result does not depend on its batch.
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

inline float f32(c10::BFloat16 x) { return static_cast<float>(x); }
inline c10::BFloat16 bf(float x) { return c10::BFloat16(x); }        // round to nearest even

// out = rms_norm(x) * w over H values (out may be x: each value is read before it is written)
void norm_row(const c10::BFloat16* x, const c10::BFloat16* w, c10::BFloat16* out, int64_t H, float eps) {
  float sum = 0.f;
  for (int64_t i = 0; i < H; ++i) sum += f32(x[i]) * f32(x[i]);
  const float r = 1.f / std::sqrt(sum / static_cast<float>(H) + eps);
  for (int64_t i = 0; i < H; ++i) out[i] = bf(f32(w[i]) * f32(bf(f32(x[i]) * r)));
}

void add_norm_row(c10::BFloat16* x, const c10::BFloat16* d, const c10::BFloat16* w, c10::BFloat16* out,
                  int64_t H, float eps) {
  for (int64_t i = 0; i < H; ++i) x[i] = bf(f32(x[i]) + f32(d[i]));
  norm_row(x, w, out, H, eps);
}

void silu_mul_row(const c10::BFloat16* h, c10::BFloat16* out, int64_t I) {
  for (int64_t i = 0; i < I; ++i) {
    const float g = f32(h[i]);
    out[i] = bf(f32(bf(g / (1.f + std::exp(-g)))) * f32(h[I + i]));
  }
}

// n pairs of src rotated by (cos, sin) pairs into dst.
void rotate(const c10::BFloat16* src, const float* cs, c10::BFloat16* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float a = f32(src[2 * i]), b = f32(src[2 * i + 1]), c = cs[2 * i], s = cs[2 * i + 1];
    dst[2 * i] = bf(a * c - b * s);
    dst[2 * i + 1] = bf(a * s + b * c);
  }
}

void check_rows(const torch::Tensor& t, const char* name) {
  TORCH_CHECK(t.dim() == 2 && t.is_contiguous() && t.scalar_type() == at::kBFloat16, name,
              ": a contiguous (rows, width) bf16 tensor");
}

}  // namespace

torch::Tensor add_rms_norm(torch::Tensor& x, const torch::Tensor& delta, const torch::Tensor& weight, double eps) {
  check_rows(x, "x");
  check_rows(delta, "delta");
  TORCH_CHECK(delta.sizes() == x.sizes(), "x and delta differ in shape");
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(1) && weight.is_contiguous() &&
              weight.scalar_type() == at::kBFloat16, "weight: (width,) bf16");
  const int64_t T = x.size(0), H = x.size(1);
  auto out = torch::empty_like(x);
  auto* xp = x.data_ptr<at::BFloat16>();
  const auto* dp = delta.data_ptr<at::BFloat16>();
  const auto* wp = weight.data_ptr<at::BFloat16>();
  auto* op = out.data_ptr<at::BFloat16>();
  at::parallel_for(0, T, 16, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) add_norm_row(xp + t * H, dp + t * H, wp, op + t * H, H, static_cast<float>(eps));
  });
  return out;
}

// heads first .. first + heads - 1 of every row of qkv (T, width), D values each, normed in place
void head_rms_norm(torch::Tensor& qkv, int64_t first, int64_t heads, int64_t D, const torch::Tensor& weight,
                   double eps) {
  check_rows(qkv, "qkv");
  TORCH_CHECK(first >= 0 && heads >= 0 && D > 0 && (first + heads) * D <= qkv.size(1), "heads past the row");
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == D && weight.is_contiguous() &&
              weight.scalar_type() == at::kBFloat16, "weight: (D,) bf16");
  const int64_t width = qkv.size(1);
  auto* x = qkv.data_ptr<at::BFloat16>() + first * D;
  const auto* w = weight.data_ptr<at::BFloat16>();
  at::parallel_for(0, qkv.size(0) * heads, 64, [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) {
      c10::BFloat16* head = x + (j / heads) * width + (j % heads) * D;
      norm_row(head, w, head, D, static_cast<float>(eps));
    }
  });
}

torch::Tensor silu_mul(const torch::Tensor& h) {
  check_rows(h, "h");
  TORCH_CHECK(h.size(1) % 2 == 0, "h: (rows, 2 x intermediate)");
  const int64_t T = h.size(0), I = h.size(1) / 2;
  auto out = torch::empty({T, I}, h.options());
  const auto* hp = h.data_ptr<at::BFloat16>();
  auto* op = out.data_ptr<at::BFloat16>();
  at::parallel_for(0, T, 8, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) silu_mul_row(hp + t * 2 * I, op + t * I, I);
  });
  return out;
}

// Where key/value element (c, d) of a (slot, kv head) region lives in the blocked layout: prefill_attention.cpp's
// packed blocks of 64 keys, keys [block][D/2][64][2], values [block][32][D][2].
inline int64_t blocked_key(int64_t c, int64_t d, int64_t D) {
  return (c / 64) * 64 * D + (d / 2) * 128 + (c % 64) * 2 + d % 2;
}
inline int64_t blocked_value(int64_t c, int64_t d, int64_t D) {
  return (c / 64) * 64 * D + ((c % 64) / 2) * 2 * D + d * 2 + c % 2;
}

torch::Tensor rope_store(const torch::Tensor& qkv, const torch::Tensor& rotation, const torch::Tensor& positions,
                         const torch::Tensor& rows, torch::Tensor& k, torch::Tensor& v, bool blocked) {
  check_rows(qkv, "qkv");
  TORCH_CHECK(k.dim() == 4 && k.is_contiguous() && k.scalar_type() == at::kBFloat16 && v.sizes() == k.sizes() &&
              v.is_contiguous() && v.scalar_type() == at::kBFloat16, "k, v: contiguous (slots, G, capacity, D) bf16");
  const int64_t T = qkv.size(0), G = k.size(1), D = k.size(3), width = qkv.size(1);
  TORCH_CHECK(D % 2 == 0 && D <= 256 && width % D == 0 && width / D > 2 * G, "qkv: (T, (H + 2G) D)");
  const int64_t H = width / D - 2 * G, rows_total = k.numel() / D;
  TORCH_CHECK(rotation.dim() == 3 && rotation.size(1) == D / 2 && rotation.size(2) == 2 && rotation.is_contiguous() &&
              rotation.scalar_type() == at::kFloat, "rotation: (P, D/2, 2) float32");
  TORCH_CHECK(positions.dim() == 1 && positions.size(0) == T && positions.scalar_type() == at::kLong &&
              positions.is_contiguous(), "positions: (T,) int64");
  TORCH_CHECK(rows.dim() == 1 && rows.size(0) == T * G && rows.scalar_type() == at::kLong && rows.is_contiguous(),
              "rows: (T G,) int64");
  const int64_t* pp = positions.data_ptr<int64_t>();
  const int64_t* rp = rows.data_ptr<int64_t>();
  for (int64_t i = 0; i < T; ++i) TORCH_CHECK(pp[i] >= 0 && pp[i] < rotation.size(0), "a position past the table");
  for (int64_t i = 0; i < T * G; ++i) TORCH_CHECK(rp[i] >= 0 && rp[i] < rows_total, "a row past the store");
  const int64_t C = k.size(2);
  TORCH_CHECK(!blocked || C % 64 == 0, "a blocked store's capacity is a multiple of 64");
  auto q = torch::empty({T, H, D}, qkv.options());
  const auto* xp = qkv.data_ptr<at::BFloat16>();
  const float* cp = rotation.data_ptr<float>();
  auto* qp = q.data_ptr<at::BFloat16>();
  auto* kp = k.data_ptr<at::BFloat16>();
  auto* vp = v.data_ptr<at::BFloat16>();
  at::parallel_for(0, T, 16, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const c10::BFloat16* x = xp + t * width;
      const float* cs = cp + pp[t] * D;
      for (int64_t h = 0; h < H; ++h) rotate(x + h * D, cs, qp + (t * H + h) * D, D / 2);
      for (int64_t g = 0; g < G; ++g) {
        const int64_t row = rp[t * G + g];
        if (!blocked) {
          rotate(x + (H + g) * D, cs, kp + row * D, D / 2);
          std::memcpy(vp + row * D, x + (H + G + g) * D, D * sizeof(c10::BFloat16));
          continue;
        }
        const int64_t region = (row / C) * C * D, c = row % C;   // row = (slot G + g) C + column
        c10::BFloat16 key[256];                                   // D <= 256
        rotate(x + (H + g) * D, cs, key, D / 2);
        const c10::BFloat16* value = x + (H + G + g) * D;
        for (int64_t d = 0; d < D; ++d) {
          kp[region + blocked_key(c, d, D)] = key[d];
          vp[region + blocked_value(c, d, D)] = value[d];
        }
      }
    }
  });
  return q;
}

// These keep the GIL: a call takes ~10 us, too short for another thread to use, and each release would
// let one in that the engine thread must then wait out (the attention kernels, ms long, release it).
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("add_rms_norm", &add_rms_norm, "x += delta in place; rms_norm(x) * weight (bf16)");
  m.def("head_rms_norm", &head_rms_norm, "in place: heads first .. first + heads - 1 of each row of qkv, "
        "D values each, rms_norm * weight (bf16)", py::arg("qkv"), py::arg("first"), py::arg("heads"), py::arg("D"),
        py::arg("weight"), py::arg("eps"));
  m.def("silu_mul", &silu_mul, "silu(gate) * up over h = [gate | up] (bf16)");
  m.def("rope_store", &rope_store, "q/k rotated, K/V written at the store's rows; returns q (T, H, D) (bf16)",
        py::arg("qkv"), py::arg("rotation"), py::arg("positions"), py::arg("rows"), py::arg("k"), py::arg("v"),
        py::arg("blocked") = false);
}

// Bringing weights into L2 ahead of a product's pass (quant_stream.h, narrow_matmul.cpp: the pass over one panel
// or group asks for a later one's lines as it goes). Timing only: no value changes.
#pragma once

#include <immintrin.h>

namespace prefetch {

// `bytes` bytes from `at` asked into L2, a prefetch a cache line
inline void bring(const void* at, int bytes) {
  for (int l = 0; l < bytes; l += 64) _mm_prefetch(static_cast<const char*>(at) + l, _MM_HINT_T1);
}

}  // namespace prefetch

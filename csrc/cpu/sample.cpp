// Counter-based samplers (CPU oracle of csrc/cuda/sample.cu): see csrc/chacha.h.
#include "kernels.h"
#include "../chacha.h"

namespace fhetorch::cpu {

void sample_uniform(const uint32_t* key, uint64_t stream, int32_t* out, int64_t total, int L, int64_t n,
                    const int32_t* mod, const Threads& th) {
  th.par(total, 1024, [&](int64_t i0, int64_t i1) {
    for (int64_t e = i0; e < i1; ++e)
      out[e] = sample_uniform_one(key, stream, static_cast<uint64_t>(e), mod[2 * ((e / n) % L)]);
  });
}

template <int32_t (*ONE)(const uint32_t*, uint64_t, uint64_t)>
void sample_small(const uint32_t* key, uint64_t stream, int64_t* out, int64_t total, const Threads& th) {
  th.par(total, 1024, [&](int64_t i0, int64_t i1) {
    for (int64_t e = i0; e < i1; ++e) out[e] = ONE(key, stream, static_cast<uint64_t>(e));
  });
}

void sample_ternary(const uint32_t* key, uint64_t stream, int64_t* out, int64_t total, const Threads& th) {
  sample_small<sample_ternary_one>(key, stream, out, total, th);
}

void sample_cbd(const uint32_t* key, uint64_t stream, int64_t* out, int64_t total, const Threads& th) {
  sample_small<sample_cbd_one>(key, stream, out, total, th);
}

}  // namespace fhetorch::cpu

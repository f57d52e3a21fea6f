// Counter-based samplers (CPU oracle of csrc/cuda/sample.cu): see csrc/chacha.h.
#include <algorithm>

#include "kernels.h"
#include "../chacha.h"

namespace fhetorch::cpu {

// Elements 4b..4b+3 read the 16 words of one round-0 block: it is computed once for the four
// (sample_uniform_one per element would compute it four times); an element whose four words
// are all rejected takes sample_uniform_one's path, which gives the same value.
void sample_uniform(const uint32_t* key, uint64_t stream, int32_t* out, int64_t total, int L, int64_t n,
                    const int32_t* mod, const Threads& th) {
  th.par(total, 1024, [&](int64_t i0, int64_t i1) {
    uint32_t w[16];
    for (int64_t e = i0; e < i1;) {
      const uint64_t u = static_cast<uint64_t>(e);
      chacha20_block(key, static_cast<uint32_t>(u >> 2), static_cast<uint32_t>(stream),
                     static_cast<uint32_t>(stream >> 32), static_cast<uint32_t>(u >> 34) << 8, w);
      const int64_t end = std::min(i1, (e | 3) + 1);
      for (; e < end; ++e) {
        const int32_t q = mod[2 * ((e / n) % L)];
        const uint32_t uq = static_cast<uint32_t>(q), bound = uq * (0xFFFFFFFFu / uq);
        int32_t v = -1;
        for (int i = 0; i < 4 && v < 0; ++i) {
          const uint32_t r = w[4 * (e & 3) + i];
          if (r < bound) v = static_cast<int32_t>(r % uq);
        }
        out[e] = v >= 0 ? v : sample_uniform_one(key, stream, static_cast<uint64_t>(e), q);
      }
    }
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

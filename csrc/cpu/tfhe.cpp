// TFHE kernels on the CPU: the step functions of csrc/tfhe.h run by a team of one thread per
// ciphertext, ciphertexts in parallel (the bit-exact oracle of csrc/cuda/tfhe.cu).
#include <vector>

#include "kernels.h"

namespace fhetorch::cpu {

void tfhe_sample_int(const uint32_t* key, uint64_t stream, int64_t* out, int64_t total, int64_t lo, uint64_t span,
                     const Threads& th) {
  th.par(total, 1024, [&](int64_t i0, int64_t i1) {
    for (int64_t e = i0; e < i1; ++e) out[e] = tfhe_sample_int_one(key, stream, static_cast<uint64_t>(e), lo, span);
  });
}

void tfhe_modulus_switch(const int64_t* x, int64_t* out, int64_t total, const TfheMod& m, int bits,
                         const Threads& th) {
  th.par(total, 1024, [&](int64_t i0, int64_t i1) {
    for (int64_t e = i0; e < i1; ++e) out[e] = static_cast<int64_t>(tfhe_round_pow2(x[e], m.q_full, bits));
  });
}

void tfhe_decompose(const int64_t* x, int64_t* out, int64_t total, const TfheMod& m, int base_log, int level,
                    const Threads& th) {
  th.par(total, 256, [&](int64_t i0, int64_t i1) {
    for (int64_t e = i0; e < i1; ++e) {
      const uint64_t v = tfhe_round_pow2(x[e], m.q_full, base_log * level);
      for (int j = 0; j < level; ++j) out[e * level + j] = tfhe_digit(v, base_log, level, j);
    }
  });
}

// The GEMM tiles (csrc/tfhe.h) run by a team of one, tiles in parallel; small batches split the
// K loop so that both cores have tiles (kCpuKsTiles at once), the parts joined afterwards.
constexpr int64_t kCpuKsTiles = 8;

template <int MB>
void tfhe_keyswitch_tiles(const KeyswitchArgs& g, const Threads& th) {
  const int64_t rows = tfhe_ks_row_tiles(g, MB), cols = tfhe_ks_col_tiles(g);
  th.par(rows * cols * g.splits, 1, [&](int64_t i0, int64_t i1) {
    std::vector<int32_t> buf(static_cast<size_t>(tfhe_ks_tile_words(g.level, MB)));
    for (int64_t e = i0; e < i1; ++e) {
      const int64_t split = e / (rows * cols), rc = e - split * rows * cols;
      tfhe_team_keyswitch_tile<MB, kKsTeam>(SoloTeam{}, g, rc / cols, rc % cols, static_cast<int>(split), buf.data());
    }
  });
}

void tfhe_keyswitch(const KeyswitchArgs& g_in, const Threads& th) {
  if (g_in.B <= 0) return;
  KeyswitchArgs g = g_in;
  const int mb = tfhe_ks_plan(g, kCpuKsTiles);
  if (g.splits > 1) g.partial = th.scratch(g.splits * g.B * (g.n_out + 1) * 2);
  if (mb == 4)
    tfhe_keyswitch_tiles<4>(g, th);
  else
    tfhe_keyswitch_tiles<1>(g, th);
  if (g.splits > 1)
    th.par(g.B * (g.n_out + 1), 256, [&](int64_t i0, int64_t i1) {
      for (int64_t e = i0; e < i1; ++e) tfhe_keyswitch_finish_one(g, e);
    });
}

void tfhe_external_product(const TfheRing& r, const int64_t* glwe, const int32_t* ggsw, int64_t* out, int64_t B,
                           const Threads& th) {
  const int64_t words = tfhe_scratch_words(r), k1n = static_cast<int64_t>(r.k1) << r.log_n;
  int32_t* scratch = th.scratch(B * words);
  th.par(B, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      tfhe_team_external_product_op(SoloTeam{}, r, glwe + b * k1n, ggsw, scratch + b * words, out + b * k1n);
  });
}

// Key bit outermost (CMux-level batching): each step reads one GGSW of the key for the batch.
void tfhe_blind_rotate(const BlindRotateArgs& g_in, const Threads& th) {
  BlindRotateArgs g = g_in;
  g.scratch = th.scratch(g.B * tfhe_scratch_words(g.r));
  th.par(g.B, 16, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) tfhe_team_blind_rotate_init(SoloTeam{}, g, b);
  });
  for (int i = 0; i < g.n; ++i) {
    th.par(g.B, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) tfhe_team_cmux_step(SoloTeam{}, g, b, i);
    });
  }
}

}  // namespace fhetorch::cpu

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

// The tensor-core key switch's element-wise passes (csrc/tfhe.h); torch._int_mm runs between them.
void tfhe_keyswitch_digits(const KeyswitchArgs& g, int8_t* digits, int64_t rows, const Threads& th) {
  th.par(rows * (static_cast<int64_t>(g.n_in) + 1), 4096, [&](int64_t i0, int64_t i1) {
    for (int64_t e = i0; e < i1; ++e) tfhe_ks_digits_one(g, digits, e);
  });
}

void tfhe_keyswitch_combine(const KeyswitchArgs& g, const int32_t* sums, const Threads& th) {
  th.par(g.B * (static_cast<int64_t>(g.n_out) + 1), 4096, [&](int64_t i0, int64_t i1) {
    for (int64_t e = i0; e < i1; ++e) tfhe_ks_combine_one(g, sums + e * kKsPlanes, e);
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

void tfhe_glwe_keyswitch(const GlweKeyswitchArgs& g, const Threads& th) {
  const int64_t words = tfhe_glwe_keyswitch_words(g.r), two_n = int64_t(2) << g.r.log_n;
  int32_t* scratch = th.scratch(g.B * words);
  th.par(g.B, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      tfhe_team_glwe_keyswitch_op(SoloTeam{}, g.r, g.input(b), g.key, scratch + b * words, g.out + b * two_n);
  });
}

// The cluster path (CUDA: a cluster of 2 k1 blocks per ciphertext) with the teams of a
// ciphertext run one after another within each phase: the phases only read what the previous
// ones wrote, so this order computes what the concurrent teams do.
template <bool MULTI_BIT>
static void blind_rotate_cluster(const BlindRotateArgs& g, const Threads& th) {
  const TfheRing& r = g.r;
  const int teams = 2 * r.k1;
  const int64_t n = int64_t(1) << r.log_n, k1n = r.k1 * n;
  th.par(g.B, 1, [&](int64_t b0, int64_t b1) {
    std::vector<int64_t> acc(teams * k1n);
    std::vector<int32_t> dig(teams * r.level * n), out(teams * n);
    int32_t rot[1 << kTfheMaxGrouping];  // the same for every team: computed once
    const int32_t* peer_dig[kTfheClusterMax];
    const int32_t* peer_out[kTfheClusterMax];
    for (int c = 0; c < teams; ++c) {
      peer_dig[c] = dig.data() + c * r.level * n;
      peer_out[c] = out.data() + c * n;
    }
    const int64_t ggsw_words = static_cast<int64_t>(r.k1) * r.level * r.k1 * 2 * n;
    const int steps = MULTI_BIT ? g.n / g.grouping : g.n;
    for (int64_t b = b0; b < b1; ++b) {
      for (int c = 0; c < teams; ++c) tfhe_team_blind_rotate_init(SoloTeam{}, g, b, acc.data() + c * k1n);
      for (int i = 0; i < steps; ++i) {
        int64_t a = 0;
        if (MULTI_BIT) {
          tfhe_team_subset_rotations(SoloTeam{}, g, b, i, rot);
        } else {
          a = tfhe_mask_rotation(g, b, i);
          if (a == 0) continue;
        }
        for (int c = 0; c < teams; ++c)
          tfhe_cluster_digits<MULTI_BIT>(SoloTeam{}, r, c, a, acc.data() + c * k1n, dig.data() + c * r.level * n);
        for (int c = 0; c < teams; ++c) {
          if constexpr (MULTI_BIT)
            tfhe_cluster_product(SoloTeam{}, r, c, tfhe_key_bundle(g, i, rot), peer_dig, out.data() + c * n);
          else
            tfhe_cluster_product(SoloTeam{}, r, c, TfheGgswOperand{g.bsk + i * ggsw_words}, peer_dig,
                                 out.data() + c * n);
        }
        for (int c = 0; c < teams; ++c)
          tfhe_cluster_accumulate<MULTI_BIT>(SoloTeam{}, r, peer_out, acc.data() + c * k1n);
      }
      for (int64_t e = 0; e < k1n; ++e) g.acc[b * k1n + e] = acc[e];
    }
  });
}

// The same team functions as CUDA, with the same dispatch: small batches take the cluster path
// (tfhe_cluster_fits); otherwise where CUDA runs the fused kernel (tfhe_fused_fits) every
// ciphertext runs its whole rotation in its own scratch (ciphertexts in parallel); otherwise key
// bit (multi-bit: group) outermost, one step over the batch each (CUDA: one launch per step).
void tfhe_blind_rotate(const BlindRotateArgs& g_in, const Threads& th) {
  if (tfhe_cluster_fits(g_in))
    return g_in.grouping > 1 ? blind_rotate_cluster<true>(g_in, th) : blind_rotate_cluster<false>(g_in, th);
  BlindRotateArgs g = g_in;
  const int64_t words = tfhe_scratch_words(g.r), k1n = static_cast<int64_t>(g.r.k1) << g.r.log_n;
  g.scratch = th.scratch(g.B * words);
  const bool multi_bit = g.grouping > 1;
  if (tfhe_fused_fits(g.r)) {
    th.par(g.B, 1, [&](int64_t b0, int64_t b1) {
      int32_t rot[1 << kTfheMaxGrouping];
      for (int64_t b = b0; b < b1; ++b) {
        if (multi_bit)
          tfhe_team_blind_rotate<true>(SoloTeam{}, g, b, g.acc + b * k1n, g.scratch + b * words, rot);
        else
          tfhe_team_blind_rotate<false>(SoloTeam{}, g, b, g.acc + b * k1n, g.scratch + b * words, rot);
      }
    });
    return;
  }
  th.par(g.B, 16, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) tfhe_team_blind_rotate_init(SoloTeam{}, g, b, g.acc + b * k1n);
  });
  const int steps = tfhe_rotate_steps(g);
  for (int i = 0; i < steps; ++i) {
    th.par(g.B, 1, [&](int64_t b0, int64_t b1) {
      int32_t rot[1 << kTfheMaxGrouping];
      for (int64_t b = b0; b < b1; ++b) {
        if (multi_bit)
          tfhe_team_rotate_step<true>(SoloTeam{}, g, b, i, g.acc + b * k1n, g.scratch + b * words, rot);
        else
          tfhe_team_rotate_step<false>(SoloTeam{}, g, b, i, g.acc + b * k1n, g.scratch + b * words, rot);
      }
    });
  }
}

}  // namespace fhetorch::cpu

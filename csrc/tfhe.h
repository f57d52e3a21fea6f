// TFHE on q = q0 * q1 (two NTT primes below 2^31, q_i = 1 mod 2^17): the step functions
// shared by the CPU kernels (csrc/cpu/tfhe.cpp) and the CUDA kernels (csrc/cuda/tfhe.cu), so
// both devices compute the same values bit for bit. Semantics in csrc/bind/schema.cpp
// ("tfhe_*"); the math in docs/tfhe.md.
//
// Integers mod q are int64 in [0, q) (q < 2^62: sums of two fit); polynomial products run
// per prime on the CKKS side's Montgomery arithmetic and NTT (same tables, same butterflies as
// csrc/cpu/ntt.cpp), and the two residues are joined by CRT (tfhe_compose).
//
// Work on one ciphertext is written for a "team": `rank` and `size` split the loops, `sync()`
// is a barrier between phases. The CPU runs a team of one (no barrier), CUDA one thread block
// (__syncthreads), so one function body serves both.
#pragma once
#include <cstdint>

#include "arith.h"
#include "chacha.h"

namespace fhetorch {

// The modulus q = q0 * q1 and its CRT constant; filled on the host by the binding.
struct TfheMod {
  int32_t q[2];
  int32_t qinv[2];  // q_i^-1 mod 2^32 (Montgomery)
  int64_t q_full;   // q0 * q1 < 2^62
  int64_t q0_inv;   // q0^-1 mod q1
};

// Residues (r0 mod q0, r1 mod q1), canonical -> x in [0, q) (Garner: x = r0 + q0 * t).
FT_HD int64_t tfhe_compose(int32_t r0, int32_t r1, const TfheMod& m) {
  int64_t d = static_cast<int64_t>(r1) - static_cast<int64_t>(r0 % m.q[1]);
  if (d < 0) d += m.q[1];
  const int64_t t = d * m.q0_inv % m.q[1];  // both factors < 2^31
  return static_cast<int64_t>(r0) + static_cast<int64_t>(m.q[0]) * t;
}

// x in [0, q) or a signed small integer -> its canonical residue mod p.
FT_HD int32_t tfhe_residue(int64_t x, int32_t p) {
  int64_t r = x % p;
  return static_cast<int32_t>(r < 0 ? r + p : r);
}

FT_HD int64_t tfhe_add(int64_t a, int64_t b, int64_t q) {
  const int64_t s = a + b;
  return s >= q ? s - q : s;
}
FT_HD int64_t tfhe_sub(int64_t a, int64_t b, int64_t q) {
  const int64_t s = a - b;
  return s < 0 ? s + q : s;
}

// round(x * 2^bits / q) mod 2^bits for x in [0, q), bits <= 62, exactly: bit-by-bit long
// division (the quotient has `bits` bits; the remainder stays below q < 2^62, so its double
// fits), then round half up. The modulus switch (bits = log2 2N) and the gadget
// decomposition's rounding (bits = base_log * level) are both this.
FT_HD uint64_t tfhe_round_pow2(int64_t x, int64_t q, int bits) {
  uint64_t r = static_cast<uint64_t>(x), res = 0;
  const uint64_t uq = static_cast<uint64_t>(q);
  for (int i = 0; i < bits; ++i) {
    r <<= 1;
    res <<= 1;
    if (r >= uq) {
      r -= uq;
      res |= 1u;
    }
  }
  if (2 * r >= uq) res += 1;
  return res & ((uint64_t(1) << bits) - 1);
}

// Digit j (j = 0 the most significant) of the balanced base-2^base_log decomposition of
// v < 2^(base_log * level): digits in [-B/2, B/2) with sum_j d_j B^(level-1-j) = v mod B^level.
// Computed from the least significant digit up, as the carries run.
FT_HD int32_t tfhe_digit(uint64_t v, int base_log, int level, int j) {
  const uint64_t mask = (uint64_t(1) << base_log) - 1, half = uint64_t(1) << (base_log - 1);
  int64_t d = 0;
  for (int k = level - 1; k >= j; --k) {
    const uint64_t u = v & mask;
    v >>= base_log;
    d = static_cast<int64_t>(u);
    if (u >= half) {
      d -= static_cast<int64_t>(mask) + 1;
      v += 1;
    }
  }
  return static_cast<int32_t>(d);
}

// Coefficient c of X^s * P for P (N = 2^log_n coefficients mod q), s in [0, 2N): negacyclic.
FT_HD int64_t tfhe_rotated(const int64_t* p, int64_t c, int64_t s, int log_n, int64_t q) {
  int64_t u = c - s;
  if (u >= 0) return p[u];
  u += int64_t(2) << log_n;
  const int64_t n = int64_t(1) << log_n;
  if (u < n) return p[u];
  const int64_t v = p[u - n];
  return v == 0 ? 0 : q - v;
}

// Uniform int64 in [lo, lo + span) (span in [1, 2^62]) by rejection (no modulo bias): element
// e reads words 2(e%8), 2(e%8)+1 of block e/8, trying round 0, 1, ... (as chacha.h's samplers).
FT_HD int64_t tfhe_sample_int_one(const uint32_t key[8], uint64_t stream, uint64_t e, int64_t lo, uint64_t span) {
  const uint64_t limit = span * (~uint64_t(0) / span);
  uint32_t w[16];
  for (uint32_t round = 0;; ++round) {
    chacha20_block(key, static_cast<uint32_t>(e >> 3), static_cast<uint32_t>(stream),
                   static_cast<uint32_t>(stream >> 32), round ^ (static_cast<uint32_t>(e >> 35) << 8), w);
    const uint64_t r = static_cast<uint64_t>(w[2 * (e & 7u)]) | (static_cast<uint64_t>(w[2 * (e & 7u) + 1]) << 32);
    if (r < limit) return lo + static_cast<int64_t>(r % span);
  }
}

// ---- teams ---------------------------------------------------------------------------------

struct SoloTeam {  // the CPU: one thread per ciphertext
  static constexpr int rank = 0, size = 1;
  FT_HD void sync() const {}
};

// Forward (INV false: Cooley-Tukey, natural in, bit-reversed out) or inverse (Gentleman-Sande,
// then times post[limb]) negacyclic NTT of `rows` rows of N, row r on limb r & 1 (the rows of a
// TFHE polynomial alternate q0, q1), twiddles as csrc/cpu/ntt.cpp's (tw (2, N), Montgomery).
template <bool INV, class T>
FT_HD void tfhe_team_ntt(const T& t, int32_t* a, int rows, int log_n, const int32_t* tw, const int32_t* post,
                         const TfheMod& m) {
  const uint32_t n = 1u << log_n, half = n >> 1;
  const uint32_t items = static_cast<uint32_t>(rows) * half;
  for (int stage = 0; stage < log_n; ++stage) {
    // forward: m = 2^stage groups of 2t, t = N / 2^(stage+1); inverse runs the stages reversed
    const int lm = INV ? log_n - 1 - stage : stage;
    const uint32_t groups = 1u << lm, lt = static_cast<uint32_t>(log_n - 1 - lm);
    for (uint32_t it = static_cast<uint32_t>(t.rank); it < items; it += static_cast<uint32_t>(t.size)) {
      const uint32_t r = it >> (log_n - 1), bf = it & (half - 1);
      const int l = static_cast<int>(r & 1u);
      const int32_t q = m.q[l], qinv = m.qinv[l];
      const uint32_t i = bf >> lt, j = bf & ((1u << lt) - 1u);
      int32_t* lo = a + static_cast<int64_t>(r) * n + (2u * i << lt) + j;
      int32_t* hi = lo + (1u << lt);
      const int32_t s = tw[static_cast<int64_t>(l) * n + groups + i];
      const int32_t u = *lo, v = *hi;
      if (INV) {
        *lo = add_mod(u, v, q);
        *hi = mont_mul(u - v, s, q, qinv);
      } else {
        const int32_t sv = mont_mul(v, s, q, qinv);
        *lo = add_mod(u, sv, q);
        *hi = sub_mod(u, sv, q);
      }
    }
    t.sync();
  }
  if (INV) {
    const uint32_t total = static_cast<uint32_t>(rows) * n;
    for (uint32_t e = static_cast<uint32_t>(t.rank); e < total; e += static_cast<uint32_t>(t.size)) {
      const int l = static_cast<int>((e >> log_n) & 1u);
      a[e] = mont_mul(a[e], post[l], m.q[l], m.qinv[l]);
    }
    t.sync();
  }
}

// ---- external product, CMux, blind rotation ------------------------------------------------

// What the polynomial ops share: k1 = k + 1 polynomials of N = 2^log_n per GLWE ciphertext;
// GGSW (k1, level, k1, 2, N): row (p, j) is a GLWE encryption (NTT form over (q0, q1),
// Montgomery) of zero plus mu * G_j on component p, G_j = round(q / B^(j+1)).
struct TfheRing {
  TfheMod m;
  int log_n, k1, base_log, level;
  const int32_t* psi;      // (2, N) forward twiddles
  const int32_t* psi_inv;  // (2, N) inverse twiddles
  const int32_t* post;     // (2,) N^-1 * 2^32 mod q_i
};

// Scratch words (int32) one ciphertext's team needs: xt (k1 N int64), buf (2 N), macc (2 k1 N).
FT_HD int64_t tfhe_scratch_words(const TfheRing& r) {
  const int64_t n = int64_t(1) << r.log_n;
  return 2 * r.k1 * n + 2 * n + 2 * r.k1 * n;
}

// acc (k1, N) += GGSW x GLWE, where xt (k1, N) holds the GLWE's coefficients already rounded
// to base_log * level bits (tfhe_round_pow2): sum over (p, j) of digit_j(xt_p) * row(p, j),
// each product per prime in the NTT domain, one INTT per output polynomial, then CRT.
template <class T>
FT_HD void tfhe_team_external_product(const T& t, const TfheRing& r, const uint64_t* xt, const int32_t* ggsw,
                                      int32_t* buf, int32_t* macc, int64_t* acc) {
  const uint32_t n = 1u << r.log_n, two_n = 2u * n;
  const uint32_t k1n2 = static_cast<uint32_t>(r.k1) * two_n;
  for (uint32_t e = static_cast<uint32_t>(t.rank); e < k1n2; e += static_cast<uint32_t>(t.size)) macc[e] = 0;
  for (int p = 0; p < r.k1; ++p) {
    for (int j = 0; j < r.level; ++j) {
      for (uint32_t e = static_cast<uint32_t>(t.rank); e < two_n; e += static_cast<uint32_t>(t.size)) {
        const int l = static_cast<int>(e >> r.log_n);
        const int32_t d = tfhe_digit(xt[static_cast<int64_t>(p) * n + (e & (n - 1u))], r.base_log, r.level, j);
        buf[e] = d < 0 ? d + r.m.q[l] : d;
      }
      t.sync();
      tfhe_team_ntt<false>(t, buf, 2, r.log_n, r.psi, nullptr, r.m);
      const int32_t* row = ggsw + static_cast<int64_t>(p * r.level + j) * k1n2;
      for (uint32_t e = static_cast<uint32_t>(t.rank); e < k1n2; e += static_cast<uint32_t>(t.size)) {
        const uint32_t x = e % two_n;
        const int l = static_cast<int>(x >> r.log_n);
        const int32_t q = r.m.q[l];
        macc[e] = add_mod(macc[e], mont_mul(buf[x], row[e], q, r.m.qinv[l]), q);
      }
      t.sync();  // buf is refilled next
    }
  }
  tfhe_team_ntt<true>(t, macc, 2 * r.k1, r.log_n, r.psi_inv, r.post, r.m);
  const uint32_t k1n = static_cast<uint32_t>(r.k1) * n;
  for (uint32_t e = static_cast<uint32_t>(t.rank); e < k1n; e += static_cast<uint32_t>(t.size)) {
    const uint32_t p = e >> r.log_n, c = e & (n - 1u);
    const int32_t* mp = macc + static_cast<int64_t>(p) * two_n + c;
    acc[e] = tfhe_add(acc[e], tfhe_compose(mp[0], mp[n], r.m), r.m.q_full);
  }
  t.sync();
}

// out (k1, N) = GGSW x glwe (k1, N): the external_product op, one ciphertext.
template <class T>
FT_HD void tfhe_team_external_product_op(const T& t, const TfheRing& r, const int64_t* glwe, const int32_t* ggsw,
                                         int32_t* scratch, int64_t* out) {
  const uint32_t k1n = static_cast<uint32_t>(r.k1) << r.log_n;
  uint64_t* xt = reinterpret_cast<uint64_t*>(scratch);
  const int bits = r.base_log * r.level;
  for (uint32_t e = static_cast<uint32_t>(t.rank); e < k1n; e += static_cast<uint32_t>(t.size)) {
    xt[e] = tfhe_round_pow2(glwe[e], r.m.q_full, bits);
    out[e] = 0;
  }
  t.sync();
  int32_t* buf = scratch + 2 * k1n;
  tfhe_team_external_product(t, r, xt, ggsw, buf, buf + (2u << r.log_n), out);
}

struct BlindRotateArgs {
  TfheRing r;
  const int64_t* ct;         // (B, n + 1) LWE ciphertexts under the bootstrapping key's LWE secret
  const int64_t* luts;       // (T, N) test polynomials (the body of a trivial GLWE)
  const int64_t* lut_index;  // (B,) in [0, T) (clamped into it: never a read outside luts), or null: LUT 0
  const int32_t* bsk;        // (n, k1, level, k1, 2, N): GGSW of each LWE secret bit
  int64_t* acc;              // (B, k1, N) the accumulators (the output)
  int32_t* scratch;          // B * tfhe_scratch_words(r)
  int64_t B, T;
  int n;
};

// Accumulator b of the batch := X^(-round(body * 2N / q)) * LUT (trivial GLWE: masks zero).
template <class T>
FT_HD void tfhe_team_blind_rotate_init(const T& t, const BlindRotateArgs& g, int64_t b) {
  const TfheRing& r = g.r;
  const int64_t n = int64_t(1) << r.log_n;
  const int64_t* ct = g.ct + b * (g.n + 1);
  const int64_t body = static_cast<int64_t>(tfhe_round_pow2(ct[g.n], r.m.q_full, r.log_n + 1));
  const int64_t shift = (2 * n - body) & (2 * n - 1);
  int64_t li = g.lut_index ? g.lut_index[b] : 0;
  li = li < 0 ? 0 : (li >= g.T ? g.T - 1 : li);
  const int64_t* lut = g.luts + li * n;
  int64_t* acc = g.acc + b * r.k1 * n;
  const int64_t k1n = r.k1 * n, body_start = (r.k1 - 1) * n;
  for (int64_t e = t.rank; e < k1n; e += t.size)
    acc[e] = e < body_start ? 0 : tfhe_rotated(lut, e - body_start, shift, r.log_n, r.m.q_full);
  t.sync();
}

// Key bit i of ciphertext b: acc := CMux(bsk_i, acc, X^a_i * acc) = acc + bsk_i x ((X^a_i - 1) acc),
// a_i = round(mask_i * 2N / q). a_i = 0 leaves acc unchanged (decomposing zero gives zero).
template <class T>
FT_HD void tfhe_team_cmux_step(const T& t, const BlindRotateArgs& g, int64_t b, int i) {
  const TfheRing& r = g.r;
  const int64_t n = int64_t(1) << r.log_n;
  const int64_t a = static_cast<int64_t>(tfhe_round_pow2(g.ct[b * (g.n + 1) + i], r.m.q_full, r.log_n + 1));
  if (a == 0) return;  // the whole team sees the same a
  int64_t* acc = g.acc + b * r.k1 * n;
  int32_t* scratch = g.scratch + b * tfhe_scratch_words(r);
  uint64_t* xt = reinterpret_cast<uint64_t*>(scratch);
  const int bits = r.base_log * r.level;
  const int64_t k1n = r.k1 * n;
  for (int64_t e = t.rank; e < k1n; e += t.size) {
    const int64_t p = e >> r.log_n, c = e & (n - 1);
    const int64_t diff = tfhe_sub(tfhe_rotated(acc + p * n, c, a, r.log_n, r.m.q_full), acc[e], r.m.q_full);
    xt[e] = tfhe_round_pow2(diff, r.m.q_full, bits);
  }
  t.sync();  // every read of acc is done before the product adds to it
  const int32_t* ggsw = g.bsk + static_cast<int64_t>(i) * r.k1 * r.level * r.k1 * 2 * n;
  int32_t* buf = scratch + 2 * k1n;
  tfhe_team_external_product(t, r, xt, ggsw, buf, buf + 2 * n, acc);
}

// ---- LWE key switching: a tiled integer GEMM -----------------------------------------------
//
// out[b] = (0, ..., 0, body_b) - sum_t d[b, t] * KSK[t], t = i * level + j running over the n_in
// masks and their level digits: per prime a GEMM digits (B, n_in level) x KSK_l (n_in level,
// n_out + 1). A tile is 16 mb ciphertexts x kKsCols output coefficients, both primes at once (the
// digits do not depend on the prime). Its K loop advances by tfhe_ks_masks_per_step masks: a
// step loads their digits (computed from the masks as they are loaded: no digit pass) and the
// matching key rows into the team's shared buffer, then every micro-tile multiply-accumulates.
// 256 micro-tiles (y, x) in 16 x 16: micro-tile (y, x) owns ciphertexts y + 16 m (m < mb) and
// coefficients x + 16 c (c < 4), so consecutive threads read consecutive shared words and write
// consecutive outputs. CUDA: a block of 256 threads, one micro-tile each; the CPU: a team of one
// running all 256. Small batches cut the K loop into `splits` parts (grid z) whose sums land in
// `partial` and are joined by tfhe_keyswitch_finish_one.
//
// Lazy int64 accumulation: |d| <= B/2 = 2^(base_log-1) and residues < 2^31, so a product is below
// 2^(base_log+30) in magnitude; after a reduction |acc| < q_l < 2^31, and R = 2^(32-base_log)
// products add less than 2^62: |acc| < 2^62 + 2^31 < 2^63. The sum is reduced every
// floor(R / terms) steps (never at base_log <= 8 and K <= 2^24), and once at the end, so the
// result is the exact canonical residue whatever the tiling: CPU and CUDA agree bit for bit.

constexpr int kKsTeam = 256;         // micro-tiles per tile (threads of a CUDA block)
constexpr int kKsCols = 64;          // output coefficients per tile: 4 per micro-tile
constexpr int kKsTermsPerStep = 32;  // digits per K step (at least one mask's level digits)

struct KeyswitchArgs {
  TfheMod m;
  const int64_t* ct;             // (B, n_in + 1)
  const int32_t* keyswitch_key;  // (n_in, level, 2, n_out + 1): LWE encryptions under s_out of s_in[i] * G_j, residues
  int64_t* out;                  // (B, n_out + 1)
  int32_t* partial;              // splits > 1: (splits, B, n_out + 1, 2) canonical residues of each part's sum
  int64_t B;
  int n_in, n_out, base_log, level;
  int splits;  // parts of the K loop (1: the tile writes out itself)
};

FT_HD int tfhe_ks_masks_per_step(int level) { return level >= kKsTermsPerStep ? 1 : kKsTermsPerStep / level; }
FT_HD int tfhe_ks_steps(const KeyswitchArgs& g) {
  const int per = tfhe_ks_masks_per_step(g.level);
  return (g.n_in + per - 1) / per;
}
FT_HD int64_t tfhe_ks_col_tiles(const KeyswitchArgs& g) { return (g.n_out + kKsCols) / kKsCols; }
FT_HD int64_t tfhe_ks_row_tiles(const KeyswitchArgs& g, int mb) { return (g.B + 16 * mb - 1) / (16 * mb); }
// int32 words of one tile's shared buffer: digits (terms, 16 mb) and key rows (2, terms, kKsCols).
FT_HD int64_t tfhe_ks_tile_words(int level, int mb) {
  const int64_t terms = static_cast<int64_t>(tfhe_ks_masks_per_step(level)) * level;
  return terms * 16 * mb + 2 * terms * kKsCols;
}

// The tiling of a batch: mb (1 or 4 ciphertexts per micro-tile: 4 once the batch fills 64-row
// tiles and there are `target` of them) and the K splits, so that about `target` tiles run at
// once (CUDA: two blocks per SM). Sets g.splits; returns mb.
FT_HD int tfhe_ks_plan(KeyswitchArgs& g, int64_t target) {
  const int mb = g.B >= 64 && tfhe_ks_row_tiles(g, 4) * tfhe_ks_col_tiles(g) >= target ? 4 : 1;
  const int64_t tiles = tfhe_ks_row_tiles(g, mb) * tfhe_ks_col_tiles(g);
  int64_t splits = tiles >= target ? 1 : (target + tiles - 1) / tiles;
  const int64_t steps = tfhe_ks_steps(g);
  splits = splits > 64 ? 64 : splits;
  g.splits = static_cast<int>(splits > steps ? steps : splits);
  return mb;
}

// The level balanced digits of v (as tfhe_digit gives them, j = 0 the most significant) at d[j * stride].
FT_HD void tfhe_digits(uint64_t v, int base_log, int level, int32_t* d, int stride) {
  const uint64_t mask = (uint64_t(1) << base_log) - 1, half = uint64_t(1) << (base_log - 1);
  for (int j = level - 1; j >= 0; --j) {
    const uint64_t u = v & mask;
    v >>= base_log;
    int64_t x = static_cast<int64_t>(u);
    if (u >= half) {
      x -= static_cast<int64_t>(mask) + 1;
      v += 1;
    }
    d[j * stride] = static_cast<int32_t>(x);
  }
}

// Output coefficient c of ciphertext b from the two residues of its sum: (body - sum) mod q.
FT_HD void tfhe_ks_write(const KeyswitchArgs& g, int64_t b, int64_t c, const int32_t r[2]) {
  int32_t v[2];
  for (int l = 0; l < 2; ++l) {
    const int32_t body = c == g.n_out ? tfhe_residue(g.ct[b * (g.n_in + 1) + g.n_in], g.m.q[l]) : 0;
    v[l] = tfhe_residue(static_cast<int64_t>(body) - r[l], g.m.q[l]);
  }
  g.out[b * (g.n_out + 1) + c] = tfhe_compose(v[0], v[1], g.m);
}

// The tile (row_tile, col_tile) of K part `split`; MB ciphertexts per micro-tile, OWN = 256 / team
// size micro-tiles per member; buf: tfhe_ks_tile_words(level, MB) words.
template <int MB, int OWN, class T>
FT_HD void tfhe_team_keyswitch_tile(const T& t, const KeyswitchArgs& g, int64_t row_tile, int64_t col_tile, int split,
                                    int32_t* buf) {
  constexpr int rows = 16 * MB;
  const int per = tfhe_ks_masks_per_step(g.level), terms = per * g.level;
  const int64_t w = g.n_out + 1, b0 = row_tile * rows, c0 = col_tile * kKsCols;
  const int64_t t_end = static_cast<int64_t>(g.n_in) * g.level;
  int32_t* sd = buf;                 // (terms, rows)
  int32_t* sk = buf + terms * rows;  // (2, terms, kKsCols)
  const int steps = tfhe_ks_steps(g), span = (steps + g.splits - 1) / g.splits;
  const int s0 = split * span, s1 = s0 + span < steps ? s0 + span : steps;
  const int64_t reduce = (int64_t(1) << (32 - g.base_log)) / terms;  // >= 8: base_log <= 23, terms <= 60
  int64_t acc[OWN][2][MB][4] = {};
  for (int s = s0; s < s1; ++s) {
    const int i0 = s * per;
    for (int e = t.rank; e < rows * per; e += t.size) {  // the digits of masks i0 .. i0 + per
      const int r = e / per, ii = e - r * per;
      const int64_t b = b0 + r, i = i0 + ii;
      int32_t* d = sd + ii * g.level * rows + r;
      if (b < g.B && i < g.n_in)
        tfhe_digits(tfhe_round_pow2(g.ct[b * (g.n_in + 1) + i], g.m.q_full, g.base_log * g.level), g.base_log,
                    g.level, d, rows);
      else
        for (int j = 0; j < g.level; ++j) d[j * rows] = 0;
    }
    const int64_t t0 = static_cast<int64_t>(i0) * g.level;
    for (int e = t.rank; e < 2 * terms * kKsCols; e += t.size) {  // key rows t0 .. t0 + terms, both primes
      const int c = e % kKsCols, l = (e / kKsCols) & 1, kk = e / (2 * kKsCols);
      const int64_t row = t0 + kk, col = c0 + c;
      sk[(l * terms + kk) * kKsCols + c] = row < t_end && col < w ? g.keyswitch_key[(row * 2 + l) * w + col] : 0;
    }
    t.sync();
    const bool reduce_now = (s - s0 + 1) % reduce == 0;
    for (int o = 0; o < OWN; ++o) {
      const int u = t.rank + o * t.size, y = u / 16, x = u % 16;
      for (int kk = 0; kk < terms; ++kk) {
        int32_t d[MB];
#pragma unroll
        for (int m = 0; m < MB; ++m) d[m] = sd[kk * rows + y + 16 * m];
#pragma unroll
        for (int l = 0; l < 2; ++l) {
          const int32_t* kr = sk + (l * terms + kk) * kKsCols + x;
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int32_t k = kr[16 * c];
#pragma unroll
            for (int m = 0; m < MB; ++m) acc[o][l][m][c] += static_cast<int64_t>(d[m]) * k;
          }
        }
      }
      if (reduce_now) {
#pragma unroll
        for (int l = 0; l < 2; ++l)
#pragma unroll
          for (int m = 0; m < MB; ++m)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[o][l][m][c] %= g.m.q[l];
      }
    }
    t.sync();  // the buffer is refilled next step
  }
  for (int o = 0; o < OWN; ++o) {
    const int u = t.rank + o * t.size, y = u / 16, x = u % 16;
#pragma unroll
    for (int m = 0; m < MB; ++m) {
      const int64_t b = b0 + y + 16 * m;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int64_t col = c0 + x + 16 * c;
        if (b >= g.B || col >= w) continue;
        int32_t r[2];
        for (int l = 0; l < 2; ++l) r[l] = tfhe_residue(acc[o][l][m][c] % g.m.q[l], g.m.q[l]);
        if (g.splits == 1) {
          tfhe_ks_write(g, b, col, r);
        } else {
          int32_t* p = g.partial + ((split * g.B + b) * w + col) * 2;
          p[0] = r[0];
          p[1] = r[1];
        }
      }
    }
  }
}

// Element e = (b, c) of B * (n_out + 1) after a split GEMM: the parts' residues summed.
FT_HD void tfhe_keyswitch_finish_one(const KeyswitchArgs& g, int64_t e) {
  const int64_t bw = g.B * (g.n_out + 1);
  int32_t r[2];
  for (int l = 0; l < 2; ++l) {
    int64_t sum = 0;  // splits <= 64 residues < 2^31
    for (int s = 0; s < g.splits; ++s) sum += g.partial[(s * bw + e) * 2 + l];
    r[l] = static_cast<int32_t>(sum % g.m.q[l]);
  }
  const int64_t b = e / (g.n_out + 1);
  tfhe_ks_write(g, b, e - b * (g.n_out + 1), r);
}

}  // namespace fhetorch

// Host emulation of the CUDA block programs: the NTT's two phases (csrc/cuda/ntt_core.cuh),
// base conversion (bconv_core.cuh) and the fused key-switching pipelines (mod_up_core.cuh,
// keyswitch_inner_core.cuh, switch_modulus_core.cuh): the same programs and pipelines, run by
// program.cuh's HostExec (block by block and, within a block, step by step with every thread
// of a step before the next: the __syncthreads() semantics). Built as a shared library with
// nvcc (host code only, no GPU needed) and driven from tests/_ops/test_emulated.py through
// ctypes against the CPU ops. Scratch starts poisoned, so a read of a word no program wrote
// shows up in the results.
#include <cstring>
#include <vector>

#include "../../csrc/cuda/fourier_split_core.cuh"
#include "../../csrc/cuda/keyswitch_core.cuh"
#include "../../csrc/cuda/sample_core.cuh"

using namespace fhetorch;
using namespace fhetorch::cuda;

namespace {

std::vector<int32_t> poisoned(int64_t words) {
  return std::vector<int32_t>(static_cast<size_t>(words), static_cast<int32_t>(HostExec::kPoison));
}

ModUpArgs mod_up_args(const int32_t* a, const int32_t* b, long long b_stride, long long B, int L, int K, int log_n,
                      const int32_t* pre, const int32_t* mod_ext, const int32_t* psi_ext, const int32_t* psi_inv_ext,
                      const int32_t* mats, int alpha_max, const int* bounds, int beta) {
  ModUpArgs g{};
  g.a = a;
  g.a_stride = static_cast<int64_t>(L) << log_n;
  g.b = b;
  g.b_stride = b_stride;
  g.pre = pre;
  g.mod_ext = mod_ext;
  g.psi_ext = psi_ext;
  g.psi_inv_ext = psi_inv_ext;
  g.mats = mats;
  g.B = B;
  g.L = L;
  g.K = K;
  g.log_n = log_n;
  g.beta = beta;
  g.alpha_max = alpha_max;
  for (int j = 0; j <= beta; ++j) g.lo[j] = bounds[j];
  return g;
}

// A table row map of `count` limbs from a host array (null: no map), as the binding's
// check_table_rows fills it; false if it cannot hold them.
bool table_rows(const int* rows, int count, TableRows& out) {
  out = TableRows{};
  if (!rows) return true;
  if (count > kMaxTableRows) return false;
  out.count = count;
  for (int l = 0; l < count; ++l) {
    if (rows[l] < 0 || rows[l] > kMaxTableRow) return false;
    out.row[l] = static_cast<int16_t>(rows[l]);
  }
  return true;
}

// switch_modulus's dropped and kept rows and table row maps (g.D, g.Ld set) from host arrays; false if a map
// cannot hold them.
bool switch_rows(const int* drop, const int* keep, const int* psi_inv_drop_rows, const int* psi_dst_rows,
                 SwitchArgs& g) {
  if (!table_rows(psi_inv_drop_rows, g.D, g.psi_inv_drop_rows) || !table_rows(psi_dst_rows, g.Ld, g.psi_dst_rows))
    return false;
  for (int k = 0; k < g.D; ++k) g.drop[k] = static_cast<int16_t>(drop[k]);
  for (int i = 0; i < g.Ld; ++i) g.keep[i] = static_cast<int16_t>(keep[i]);
  return true;
}

long long result(cudaError_t err, const HostExec& ex) { return err == cudaSuccess ? ex.launches : -1; }

}  // namespace

extern "C" {

// Each returns the number of kernel launches emulated, or -1 if the pipeline refused. Every
// table row map (psi_rows, ...) is a host array of one entry per limb, or null (row l).
// mod_up with key_q null; else mod_up_keyswitch_inner (b non-null: tensor-product mode). galois:
// the fused rotation (1: none).
long long emu_mod_up(const int32_t* a, const int32_t* b, long long b_stride, int32_t* out, long long B, int L, int K,
                     int log_n, const int32_t* pre, const int32_t* mod_ext, const int32_t* psi_ext,
                     const int32_t* psi_inv_ext, const int32_t* mats, int alpha_max, const int* bounds, int beta,
                     const int32_t* key_q, const int32_t* key_p, int Lq_key, int q_start, int digit_start,
                     const int32_t* addend, const int32_t* c_add, int La, const int* psi_rows, int Ka,
                     const int32_t* acc, unsigned galois, long long addend_stride) {
  ModUpArgs g = mod_up_args(a, b, b_stride, B, L, K, log_n, pre, mod_ext, psi_ext, psi_inv_ext, mats, alpha_max,
                            bounds, beta);
  g.galois = galois == 1 ? 0u : galois;
  if (!table_rows(psi_rows, L + K, g.psi_rows)) return -1;
  KeyArgs key{key_q, key_p, Lq_key, q_start, digit_start, addend, c_add, b ? L : La, b ? 2 : Ka, acc};
  key.addend_stride = addend_stride ? addend_stride : static_cast<int64_t>(key.Ka) * key.La << log_n;  // 0: dense
  std::vector<int32_t> t = poisoned(mod_up_scratch_t(g)), d = poisoned(mod_up_scratch_d(g));
  const int64_t out_words = B * (key_q ? 2 : beta) * (L + K) << log_n;
  std::fill(out, out + out_words, static_cast<int32_t>(HostExec::kPoison));
  HostExec ex;
  return result(run_mod_up(ex, g, key_q ? &key : nullptr, out, t.data(), d.data()), ex);
}

// ntt / intt of `rows` rows (ntt_core.cuh's two phases; 2^10 <= N <= 2^17).
// n / d and n % d by the row maps' Divisor (util.cuh), for the exhaustive-edge test.
void emu_divide(long long d, const long long* n, long long count, long long* q, long long* r) {
  const Divisor by(d);
  for (long long k = 0; k < count; ++k) {
    q[k] = by.div(n[k]);
    r[k] = by.mod(n[k]);
  }
}

long long emu_ntt(const int32_t* x, int32_t* y, long long rows, int L, int log_n, const int32_t* mod, const int32_t* tw,
                  const int32_t* post, int inverse, const int* psi_rows) {
  TableRows tr;
  if (!table_rows(psi_rows, L, tr)) return -1;
  HostExec ex;
  return result(inverse ? ntt_detail::two_phase<true>(ex, log_n, x, y, rows, L, mod, tw, post, tr)
                        : ntt_detail::two_phase<false>(ex, log_n, x, y, rows, L, mod, tw, nullptr, tr),
                ex);
}

// Whether the base conversions run their tensor-core program (bconv_tc_core.cuh): 1 yes, 0 the
// integer-pipe one, -1 as FHETORCH_BCONV_TC says.
void emu_set_bconv_tc(int on) { bconv_tc_override() = on; }

// The bconv op (bconv_core.cuh): x (batch, La, n) -> y (batch, Lb, n).
long long emu_bconv(const int32_t* x, int32_t* y, long long batch, int La, int Lb, long long n, const int32_t* mod_in,
                    const int32_t* mod_out, const int32_t* mat) {
  HostExec ex;
  return result(run_bconv_batch(ex, x, y, batch, La, Lb, n, mod_in, mod_out, mat), ex);
}

// The samplers' CUDA thread bodies (sample_core.cuh), every thread of the grid in turn.
// kind: 0 uniform (out int32 (total), limb (e / n) % L), 1 ternary, 2 CBD (out int64).
long long emu_sample(int kind, const uint32_t* key, unsigned long long stream, void* out, long long total, int L,
                     long long n, const int32_t* mod) {
  using namespace sample_detail;
  const int per = kind == 0 ? 4 : kind == 1 ? 16 : 8;
  const SmallArgs small{key, stream, static_cast<int64_t*>(out), total};
  const UniformArgs uniform{key, stream, static_cast<int32_t*>(out), total, make_limb_of(n, L), mod};
  for (int64_t t = 0; t * per < total; ++t) {
    if (kind == 0) uniform_thread(uniform, t);
    else if (kind == 1) ternary_thread(small, t);
    else cbd_thread(small, t);
  }
  return (total + per - 1) / per;
}

long long emu_switch_modulus(const int32_t* x, int32_t* out, long long B, int Ls, int log_n, const int* drop, int D,
                             const int* keep, int Ld, const int32_t* pre, const int32_t* mod_drop,
                             const int32_t* psi_inv_drop, const int32_t* mod_dst, const int32_t* psi_dst,
                             const int32_t* mat, const int32_t* c_keep, const int32_t* c_sub, const int32_t* addend,
                             int K, int Ka, const int* psi_inv_drop_rows, const int* psi_dst_rows, unsigned galois) {
  SwitchArgs g{x, pre, mod_drop, psi_inv_drop, mod_dst, psi_dst, mat, c_keep, c_sub, addend, B, Ls, D, Ld, log_n, K, Ka,
               galois == 1 ? 0u : galois, {}, {}, {}, {}};
  if (!switch_rows(drop, keep, psi_inv_drop_rows, psi_dst_rows, g)) return -1;
  std::vector<int32_t> t = poisoned(switch_scratch_t(g)), y = poisoned(switch_scratch_y(g));
  std::fill(out, out + (B * Ld << log_n), static_cast<int32_t>(HostExec::kPoison));
  HostExec ex;
  return result(run_switch_modulus(ex, g, out, t.data(), y.data()), ex);
}

// keyswitch (keyswitch_core.cuh): mod_up_keyswitch_inner's arguments (as emu_mod_up's, with a key), then
// switch_modulus's of the key product u (as emu_switch_modulus's, x = u, B = 2 * the batch, K = 2);
// split: the key product in two parts around ModDown's first launches, as on the GPU; cap > 0: the kept
// rows' key product on a grid of cap blocks striding over its work.
long long emu_keyswitch(const int32_t* a, const int32_t* b, long long b_stride, int32_t* out, long long B, int L, int K,
                        int log_n, const int32_t* pre, const int32_t* mod_ext, const int32_t* psi_ext,
                        const int32_t* psi_inv_ext, const int32_t* mats, int alpha_max, const int* bounds, int beta,
                        const int32_t* key_q, const int32_t* key_p, int Lq_key, int q_start, int digit_start,
                        const int32_t* addend, const int32_t* c_add, int La, const int* psi_rows, int Ka,
                        unsigned galois, const int* drop, int D, const int* keep, int Ld, const int32_t* down_pre,
                        const int32_t* mod_drop, const int32_t* psi_inv_drop, const int32_t* mod_dst,
                        const int32_t* psi_dst, const int32_t* mat, const int32_t* c_keep, const int32_t* c_sub,
                        const int32_t* down_addend, int down_Ka, const int* psi_inv_drop_rows,
                        const int* psi_dst_rows, int split, long long cap) {
  ModUpArgs g = mod_up_args(a, b, b_stride, B, L, K, log_n, pre, mod_ext, psi_ext, psi_inv_ext, mats, alpha_max,
                            bounds, beta);
  const uint32_t gal = galois == 1 ? 0u : galois;
  g.galois = gal;
  if (!table_rows(psi_rows, L + K, g.psi_rows)) return -1;
  KeyArgs key{key_q, key_p, Lq_key, q_start, digit_start, addend, c_add, b ? L : La, b ? 2 : Ka, nullptr};
  key.addend_stride = static_cast<int64_t>(key.Ka) * key.La << log_n;
  std::vector<int32_t> u = poisoned(2 * B * (L + K) << log_n);
  SwitchArgs s{u.data(), down_pre, mod_drop, psi_inv_drop, mod_dst, psi_dst, mat, c_keep, c_sub, down_addend,
               2 * B, L + K, D, Ld, log_n, 2, down_Ka, gal, {}, {}, {}, {}};
  if (!switch_rows(drop, keep, psi_inv_drop_rows, psi_dst_rows, s)) return -1;
  std::vector<int32_t> t = poisoned(mod_up_scratch_t(g)), d = poisoned(mod_up_scratch_d(g)),
                       st = poisoned(switch_scratch_t(s)), sy = poisoned(switch_scratch_y(s));
  std::fill(out, out + (2 * B * Ld << log_n), static_cast<int32_t>(HostExec::kPoison));
  HostExec ex;
  SameStream<HostExec> side{ex};
  return result(
      run_keyswitch(ex, side, g, key, s, u.data(), out, t.data(), d.data(), st.data(), sy.data(), split != 0, cap), ex);
}

// The Fourier blind rotation of large rings (fourier_split_core.cuh), `chunk` ciphertexts at a time:
// ct (B, n + 1) mod q, luts (T, N) mod q, lut_index (B,) or null, bsk (n, k1, level, k1, N/2) complex,
// twiddles (N/2,) complex -> acc (B, k1, N) mod q. -1 if the path does not take these shapes. min_blocks:
// fourier_split::geometry's (1: the largest blocks at any batch).
long long emu_fourier_split(const int64_t* ct, const int64_t* luts, const int64_t* lut_index, const double* bsk,
                            const double* twiddles, int64_t* acc, long long B, long long T, int n, int log_n, int k1,
                            int base_log, int level, long long q, long long chunk, long long min_blocks) {
  FourierRotateArgs a{};
  a.g = TfheTorusGgsw{TfheFftRing{log_n, twiddles}, k1, base_log, level};
  a.m.q_full = q;
  a.ct = ct;
  a.luts = luts;
  a.lut_index = lut_index;
  a.bsk = bsk;
  a.acc = acc;
  a.B = B;
  a.T = T;
  a.n = n;
  a.grouping = 1;
  if (!fourier_split::fits(a.g, 1)) return -1;
  std::vector<int32_t> scratch = poisoned(chunk * fourier_split::scratch_words(a.g));
  std::fill(acc, acc + (B * k1 << log_n), static_cast<int64_t>(-1));
  HostExec ex;
  return result(fourier_split::run(ex, a, reinterpret_cast<uint32_t*>(scratch.data()), chunk, min_blocks), ex);
}

}  // extern "C"

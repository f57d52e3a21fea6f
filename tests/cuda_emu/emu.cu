// Host emulation of the fused key-switching kernels (csrc/cuda/keyswitch_core.cuh): the
// same programs and pipelines, run block by block and, within a block, step by step with
// every thread of a step before the next (the __syncthreads() semantics). Built as a
// shared library with nvcc (host code only, no GPU needed) and driven from
// tests/_ops/test_fused.py through ctypes against the CPU kernels.
#include <cstring>
#include <vector>

#include "../../csrc/cuda/keyswitch_core.cuh"

using namespace fhetorch::cuda;
using namespace fhetorch::cuda::ks_detail;

namespace {

constexpr uint32_t kPoison = 0x7fffffffu;  // never a canonical residue of a prime < 2^31 - 1

struct EmuExec {
  long long launches = 0;
  template <class P>
  cudaError_t run(const typename P::Args& a) {
    const int64_t blocks = P::blocks(a);
    if (blocks <= 0) return cudaSuccess;
    ++launches;
    alignas(16) static thread_local uint32_t sm[P::SMEM];
    std::vector<typename P::State> st(P::THREADS);
    for (int64_t blk = 0; blk < blocks; ++blk) {
      for (int i = 0; i < P::SMEM; ++i) sm[i] = kPoison;
      const typename P::Blk b = P::setup(a, blk, sm);
      for (auto& s : st) s = typename P::State{};
      const int ns = P::num_steps(a, b);
      for (int s = 0; s < ns; ++s)
        for (int tid = 0; tid < P::THREADS; ++tid) P::step(a, b, s, tid, st[tid]);
    }
    return cudaSuccess;
  }
};

struct ModUpRun {
  EmuExec& ex;
  const MuArgs& a;
  bool fused;
  template <int LOG_N>
  cudaError_t operator()() const {
    return mod_up_pipeline<LOG_N>(ex, a, fused);
  }
};

struct SwitchRun {
  EmuExec& ex;
  const SwArgs& a;
  template <int LOG_N>
  cudaError_t operator()() const {
    return switch_pipeline<LOG_N>(ex, a);
  }
};

}  // namespace

extern "C" {

// Each returns the number of kernel launches emulated, or -1 on invalid arguments.
long long emu_mod_up(const int32_t* a, int32_t* out, int L, int K, int log_n, const int32_t* pre,
                     const int32_t* mod_ext, const int32_t* psi_ext, const int32_t* psi_inv_ext, const int32_t* mats,
                     int alpha_max, const int* bounds, int beta, const int* psi_rows) {
  const int64_t n = int64_t(1) << log_n;
  std::vector<int32_t> t(static_cast<size_t>(L * n), static_cast<int32_t>(kPoison));
  std::memset(out, 0x7f, sizeof(int32_t) * beta * (L + K) * n);
  ModUpTables tb{pre, mod_ext, psi_ext, psi_inv_ext, mats, alpha_max, psi_rows};
  MuArgs args;
  if (!mu_fill(args, a, t.data(), out, L, K, tb, bounds, beta, nullptr, nullptr)) return -1;
  EmuExec ex;
  if (dispatch_log_n(log_n, ModUpRun{ex, args, false}) != cudaSuccess) return -1;
  return ex.launches;
}

long long emu_mod_up_keyswitch(const int32_t* a, int32_t* out, int L, int K, int log_n, const int32_t* pre,
                               const int32_t* mod_ext, const int32_t* psi_ext, const int32_t* psi_inv_ext,
                               const int32_t* mats, int alpha_max, const int* bounds, int beta, const int32_t* key_q,
                               const int32_t* key_p, int Lq_key, int q_start, int digit_start, const int32_t* addend,
                               const int32_t* c_add, int La, const int32_t* b, const int* psi_rows) {
  const int64_t n = int64_t(1) << log_n;
  std::vector<int32_t> t(static_cast<size_t>(L * n), static_cast<int32_t>(kPoison));
  std::vector<int32_t> d(static_cast<size_t>((int64_t(beta) * (L + K) - L) * n), static_cast<int32_t>(kPoison));
  std::memset(out, 0x7f, sizeof(int32_t) * 2 * (L + K) * n);
  ModUpTables tb{pre, mod_ext, psi_ext, psi_inv_ext, mats, alpha_max, psi_rows};
  KeyTables key{key_q, key_p, Lq_key, q_start, digit_start, addend, c_add, La, b};
  MuArgs args;
  if (!mu_fill(args, a, t.data(), d.data(), L, K, tb, bounds, beta, &key, out)) return -1;
  EmuExec ex;
  if (dispatch_log_n(log_n, ModUpRun{ex, args, true}) != cudaSuccess) return -1;
  return ex.launches;
}

long long emu_switch_modulus(const int32_t* x, int32_t* out, long long B, int Ls, int log_n, const int* drop, int D,
                             const int* keep, int Ld, const int32_t* pre, const int32_t* mod_drop,
                             const int32_t* psi_inv_drop, const int32_t* mod_dst, const int32_t* psi_dst,
                             const int32_t* mat, const int32_t* c_keep, const int32_t* c_sub, const int32_t* addend,
                             long long Ba, const int* psi_inv_drop_rows, const int* psi_dst_rows) {
  const int64_t n = int64_t(1) << log_n;
  std::vector<int32_t> t(static_cast<size_t>(B * D * n), static_cast<int32_t>(kPoison));
  std::vector<int32_t> y(static_cast<size_t>(B * Ld * n), static_cast<int32_t>(kPoison));
  std::memset(out, 0x7f, sizeof(int32_t) * B * Ld * n);
  SwitchTables tb{pre, mod_drop, psi_inv_drop, mod_dst, psi_dst, mat, c_keep, c_sub, psi_inv_drop_rows, psi_dst_rows};
  SwArgs a;
  if (!sw_fill(a, x, out, t.data(), y.data(), B, Ls, drop, D, keep, Ld, tb, addend, Ba)) return -1;
  EmuExec ex;
  if (dispatch_log_n(log_n, SwitchRun{ex, a}) != cudaSuccess) return -1;
  return ex.launches;
}

}  // extern "C"

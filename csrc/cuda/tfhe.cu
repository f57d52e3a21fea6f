// TFHE kernels on CUDA (oracle: csrc/cpu/tfhe.cpp; step functions: csrc/tfhe.h). Element-wise
// ops: one thread per element. Polynomial ops: one thread block per ciphertext (a team with
// __syncthreads as its barrier). Blind rotation, ONE launch for all key bits where it fits:
// small batches a thread-block cluster of 2 k1 blocks per ciphertext (tfhe_cluster_fits), else a
// block per ciphertext with the rotation in shared memory (tfhe_fused_fits: N <= 2^12 at k = 1),
// the GGSW rows read from global memory (L2-resident: the blocks in flight run about the same
// key bit); otherwise one launch per key bit over the whole batch, scratch in global memory from
// the caching allocator. Multi-bit rotations (grouping > 1) take the same three paths (their own
// template instances), one step per group of key bits. docs/tfhe.md has the rules and the count.
#include <atomic>

#include <cooperative_groups.h>
#include <cuda_pipeline.h>

#include "kernels.h"
#include "program.cuh"
#include "util.cuh"

namespace fhetorch::cuda {
namespace {

constexpr int kBlock = 128;  // element-wise kernels
constexpr int kTeam = 256;   // threads per ciphertext
constexpr int kFusedTeam = 512;  // threads per ciphertext of the fused blind rotation
constexpr int kFusedSmallBatchTeam = 1024;  // ... when the batch leaves SMs free: one block per SM
constexpr int kClusterTeam = 256;  // threads per block of the cluster path (2 k1 blocks per ciphertext)
constexpr int kGlweKsTeam = 512;   // threads per ciphertext of the GLWE key switch

__device__ int64_t global_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }

__global__ void __launch_bounds__(kBlock)
    sample_int_kernel(const uint32_t* key, uint64_t stream, int64_t* out, int64_t total, int64_t lo, uint64_t span) {
  const int64_t e = global_index();
  if (e < total) out[e] = tfhe_sample_int_one(key, stream, static_cast<uint64_t>(e), lo, span);
}

__global__ void __launch_bounds__(kBlock)
    modulus_switch_kernel(const int64_t* x, int64_t* out, int64_t total, TfheMod m, int bits) {
  const int64_t e = global_index();
  if (e < total) out[e] = static_cast<int64_t>(tfhe_round_pow2(x[e], m.q_full, bits));
}

__global__ void __launch_bounds__(kBlock)
    decompose_kernel(const int64_t* x, int64_t* out, int64_t total, TfheMod m, int base_log, int level) {
  const int64_t e = global_index();
  if (e >= total) return;
  const uint64_t v = tfhe_round_pow2(x[e], m.q_full, base_log * level);
  for (int j = 0; j < level; ++j) out[e * level + j] = tfhe_digit(v, base_log, level, j);
}

__global__ void __launch_bounds__(kTeam)
    external_product_kernel(TfheRing r, const int64_t* glwe, const int32_t* ggsw, int64_t* out, int32_t* scratch) {
  const int64_t b = blockIdx.x, k1n = static_cast<int64_t>(r.k1) << r.log_n;
  tfhe_team_external_product_op(block_team(), r, glwe + b * k1n, ggsw, scratch + b * tfhe_scratch_words(r),
                                out + b * k1n);
}

// The GLWE key switch: a block per ciphertext; its digit scratch in the block's shared memory where
// it fits (N = 2^11, level 6: 96 KiB, two blocks an SM), else in global memory (SMEM false).
template <bool SMEM>
__global__ void __launch_bounds__(kGlweKsTeam, SMEM ? 2 : 1)
    glwe_keyswitch_kernel(const __grid_constant__ GlweKeyswitchArgs g, int32_t* scratch) {
  extern __shared__ __align__(16) int32_t glwe_ks_smem[];
  const int64_t b = blockIdx.x;
  int32_t* dig = SMEM ? glwe_ks_smem : scratch + b * tfhe_glwe_keyswitch_words(g.r);
  tfhe_team_glwe_keyswitch_op(block_team(), g.r, g.input(b), g.key, dig, g.out + b * (int64_t(2) << g.r.log_n));
}

__global__ void __launch_bounds__(kTeam) blind_rotate_init_kernel(BlindRotateArgs g) {
  const int64_t b = blockIdx.x;
  tfhe_team_blind_rotate_init(block_team(), g, b, g.acc + b * (static_cast<int64_t>(g.r.k1) << g.r.log_n));
}

template <bool MULTI_BIT>
__global__ void __launch_bounds__(kTeam) rotate_step_kernel(BlindRotateArgs g, int i) {
  __shared__ int32_t rot[1 << kTfheMaxGrouping];  // the group's subset rotations (multi-bit)
  const int64_t b = blockIdx.x;
  tfhe_team_rotate_step<MULTI_BIT>(block_team(), g, b, i, g.acc + b * (static_cast<int64_t>(g.r.k1) << g.r.log_n),
                      g.scratch + b * tfhe_scratch_words(g.r), rot);
}

// Shared memory: the accumulator (k1 N int64), then the digit scratch (tfhe_scratch_words int32).
// THREADS = kFusedTeam: two blocks per SM at N = 2048, k = 1, level 1 (64 KiB each; 64
// registers per thread). kFusedSmallBatchTeam: batches of at most one ciphertext per SM, where
// twice the threads shorten each ciphertext's rotation.
// MULTI_BIT: the multi-bit rotation (one step per group of key bits), a kernel of its own, with
// the group's subset rotations (kTfheRotBytes) after the digit scratch.
template <int THREADS, bool MULTI_BIT>
__global__ void __launch_bounds__(THREADS, 2048 / THREADS / 2)
    blind_rotate_fused_kernel(const __grid_constant__ BlindRotateArgs g) {
  extern __shared__ __align__(16) int64_t smem[];
  const int64_t k1n = static_cast<int64_t>(g.r.k1) << g.r.log_n;
  int32_t* dig = reinterpret_cast<int32_t*>(smem + k1n);
  tfhe_team_blind_rotate<MULTI_BIT>(block_team(), g, blockIdx.x, smem, dig, dig + tfhe_scratch_words(g.r));
}

// The cluster path (csrc/tfhe.h, tfhe_cluster_*): a cluster of 2 k1 blocks per ciphertext, block
// c owning component c >> 1 on prime c & 1; shared memory per block: the accumulator replica
// (k1 N int64), the level digit rows and the output row (N int32 each), then (classical) two
// buffers of the block's GGSW rows (k1 level rows of N) or (multi-bit) the group's subset
// rotations; the other blocks' rows read through distributed shared memory; a cluster barrier
// after each phase. Classical: the next key bit's GGSW rows are copied into the other buffer
// asynchronously (cp.async) while this bit runs: at small batches nothing else hides the key's
// memory latency (one block per SM, every step reading 8 k1 level N bytes).
int64_t cluster_smem_bytes(const TfheRing& r, bool multi_bit) {
  return tfhe_cluster_bytes(r) + (multi_bit ? kTfheRotBytes : 2 * 4 * (static_cast<int64_t>(r.k1) * r.level << r.log_n));
}

// Block-wide: starts copying block c's GGSW rows of key bit i into buf (16-byte cp.async): row
// (p, j) of component c >> 1 on prime c & 1 lies at (p level + j) k1 2N + (c >> 1) 2N + (c & 1) N
// of the bit's GGSW (k1, level, k1, 2, N); in buf at (p level + j) N.
__device__ void prefetch_cluster_key(const BlindRotateArgs& g, int c, int i, int32_t* buf) {
  const TfheRing& r = g.r;
  const int64_t n = int64_t(1) << r.log_n, rows = static_cast<int64_t>(r.k1) * r.level;
  const int64_t stride = static_cast<int64_t>(r.k1) * 2 * n;
  const int32_t* src = g.bsk + i * rows * stride + (static_cast<int64_t>(c >> 1) * 2 + (c & 1)) * n;
  for (int64_t e = threadIdx.x; e < rows * n / 4; e += blockDim.x) {
    const int64_t row = (e * 4) >> r.log_n, x = (e * 4) & (n - 1);
    __pipeline_memcpy_async(buf + row * n + x, src + row * stride + x, 16);
  }
  __pipeline_commit();
}

template <bool MULTI_BIT>
__global__ void __launch_bounds__(kClusterTeam) blind_rotate_cluster_kernel(const __grid_constant__ BlindRotateArgs g) {
  namespace cg = cooperative_groups;
  extern __shared__ __align__(16) int64_t smem[];
  const TfheRing& r = g.r;
  cg::cluster_group cluster = cg::this_cluster();
  const int c = static_cast<int>(cluster.block_rank()), teams = 2 * r.k1;
  const int64_t b = blockIdx.x / teams, k1n = static_cast<int64_t>(r.k1) << r.log_n;
  int64_t* acc = smem;
  int32_t* dig = reinterpret_cast<int32_t*>(smem + k1n);
  int32_t* out = dig + (static_cast<int64_t>(r.level) << r.log_n);
  int32_t* rot = out + (int64_t(1) << r.log_n);  // multi-bit
  int32_t* key_buf[2];                            // classical
  key_buf[0] = out + (int64_t(1) << r.log_n);
  key_buf[1] = key_buf[0] + (static_cast<int64_t>(r.k1) * r.level << r.log_n);
  const int32_t* peer_dig[kTfheClusterMax];
  const int32_t* peer_out[kTfheClusterMax];
  for (int k = 0; k < teams; ++k) {
    peer_dig[k] = cluster.map_shared_rank(dig, k);
    peer_out[k] = cluster.map_shared_rank(out, k);
  }
  const BlockTeam t = block_team();
  if (!MULTI_BIT && g.n > 0) prefetch_cluster_key(g, c, 0, key_buf[0]);
  tfhe_team_blind_rotate_init(t, g, b, acc);
  cluster.sync();  // every block of the cluster runs before any reads another's memory
  const int steps = MULTI_BIT ? g.n / g.grouping : g.n;
  for (int i = 0; i < steps; ++i) {
    int64_t a = 0;
    if (MULTI_BIT) {
      tfhe_team_subset_rotations(t, g, b, i, rot);  // read in phase 2, after phase 1's barriers
    } else {
      // key_buf[(i + 1) & 1] was last read by step i - 1's product, finished before its barriers
      if (i + 1 < steps) prefetch_cluster_key(g, c, i + 1, key_buf[(i + 1) & 1]);
      else __pipeline_commit();  // an empty group keeps "all but the newest" meaning step i's
      a = tfhe_mask_rotation(g, b, i);
      if (a == 0) continue;  // the same for the whole cluster
    }
    tfhe_cluster_digits<MULTI_BIT>(t, r, c, a, acc, dig);
    if (!MULTI_BIT) __pipeline_wait_prior(1);  // this thread's copies of step i's rows have landed
    cluster.sync();  // and everyone's (the barrier also orders the digit rows)
    if constexpr (MULTI_BIT)
      tfhe_cluster_product(t, r, c, tfhe_key_bundle(g, i, rot), peer_dig, out);
    else
      tfhe_cluster_product(t, r, c, TfheRowsOperand{key_buf[i & 1], int64_t(1) << r.log_n}, peer_dig, out);
    cluster.sync();
    tfhe_cluster_accumulate<MULTI_BIT>(t, r, peer_out, acc);
    cluster.sync();  // the output rows are read before the next step rewrites them
  }
  if (!MULTI_BIT) __pipeline_wait_prior(0);
  if (c == 0)
    for (int64_t e = t.rank; e < k1n; e += t.size) g.acc[b * k1n + e] = acc[e];
}

cudaError_t elementwise_grid(int64_t total, unsigned* grid) {
  *grid = grid_for(total, kBlock);
  return *grid == 0 ? cudaErrorInvalidConfiguration : cudaSuccess;
}

}  // namespace

cudaError_t tfhe_sample_int(const uint32_t* key, uint64_t stream, int64_t* out, int64_t total, int64_t lo,
                            uint64_t span, const Stream& s) {
  if (total <= 0) return cudaSuccess;
  unsigned grid;
  if (elementwise_grid(total, &grid) != cudaSuccess) return cudaErrorInvalidConfiguration;
  sample_int_kernel<<<grid, kBlock, 0, s.stream>>>(key, stream, out, total, lo, span);
  return cudaGetLastError();
}

cudaError_t tfhe_modulus_switch(const int64_t* x, int64_t* out, int64_t total, const TfheMod& m, int bits,
                                const Stream& s) {
  if (total <= 0) return cudaSuccess;
  unsigned grid;
  if (elementwise_grid(total, &grid) != cudaSuccess) return cudaErrorInvalidConfiguration;
  modulus_switch_kernel<<<grid, kBlock, 0, s.stream>>>(x, out, total, m, bits);
  return cudaGetLastError();
}

cudaError_t tfhe_decompose(const int64_t* x, int64_t* out, int64_t total, const TfheMod& m, int base_log, int level,
                           const Stream& s) {
  if (total <= 0) return cudaSuccess;
  unsigned grid;
  if (elementwise_grid(total, &grid) != cudaSuccess) return cudaErrorInvalidConfiguration;
  decompose_kernel<<<grid, kBlock, 0, s.stream>>>(x, out, total, m, base_log, level);
  return cudaGetLastError();
}

cudaError_t tfhe_external_product(const TfheRing& r, const int64_t* glwe, const int32_t* ggsw, int64_t* out,
                                  int64_t B, const Stream& s) {
  if (B <= 0) return cudaSuccess;
  if (B > 0x7FFFFFFFLL) return cudaErrorInvalidConfiguration;
  int32_t* scratch = s.scratch(B * tfhe_scratch_words(r));
  external_product_kernel<<<static_cast<unsigned>(B), kTeam, 0, s.stream>>>(r, glwe, ggsw, out, scratch);
  return cudaGetLastError();
}

// What the fused kernel needs to know of the current device, found once per device (later calls
// and graph captures make no attribute call): its SM count, and its shared-memory opt-in,
// raised on both kernels to min(device limit, kTfheFusedBytesMax). Host calls only.
struct FusedDevice {
  int smem_limit, sms;
};

cudaError_t fused_device(FusedDevice* out) {
  constexpr int kDevices = 64;
  static std::atomic<int> limits[kDevices], sm_counts[kDevices];  // 0: not yet
  int dev = 0;
  FT_TRY(cudaGetDevice(&dev));
  if (dev < kDevices && limits[dev].load() > 0) {
    *out = FusedDevice{limits[dev].load(), sm_counts[dev].load()};
    return cudaSuccess;
  }
  int optin = 0, sms = 0;
  FT_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  FT_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int limit = static_cast<int>(optin < kTfheFusedBytesMax ? optin : kTfheFusedBytesMax);
  FT_TRY(cudaFuncSetAttribute(blind_rotate_fused_kernel<kFusedTeam, false>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
  FT_TRY(cudaFuncSetAttribute(blind_rotate_fused_kernel<kFusedSmallBatchTeam, false>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
  FT_TRY(cudaFuncSetAttribute(blind_rotate_fused_kernel<kFusedTeam, true>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
  FT_TRY(cudaFuncSetAttribute(blind_rotate_fused_kernel<kFusedSmallBatchTeam, true>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
  FT_TRY(cudaFuncSetAttribute(blind_rotate_cluster_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
  FT_TRY(cudaFuncSetAttribute(blind_rotate_cluster_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
  FT_TRY(cudaFuncSetAttribute(glwe_keyswitch_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
  if (dev < kDevices) {
    sm_counts[dev].store(sms);
    limits[dev].store(limit);
  }
  *out = FusedDevice{limit, sms};
  return cudaSuccess;
}

cudaError_t tfhe_glwe_keyswitch(const GlweKeyswitchArgs& g, const Stream& s) {
  if (g.B <= 0) return cudaSuccess;
  if (g.B > 0x7FFFFFFFLL) return cudaErrorInvalidConfiguration;
  const int64_t smem = 4 * tfhe_glwe_keyswitch_words(g.r);
  const unsigned grid = static_cast<unsigned>(g.B);
  if (smem <= kTfheFusedBytesMax) {
    FusedDevice d{};
    FT_TRY(fused_device(&d));
    if (smem <= d.smem_limit) {
      glwe_keyswitch_kernel<true><<<grid, kGlweKsTeam, static_cast<size_t>(smem), s.stream>>>(g, nullptr);
      return cudaGetLastError();
    }
  }
  int32_t* scratch = s.scratch(g.B * tfhe_glwe_keyswitch_words(g.r));
  glwe_keyswitch_kernel<false><<<grid, kGlweKsTeam, 0, s.stream>>>(g, scratch);
  return cudaGetLastError();
}

cudaError_t tfhe_blind_rotate(const BlindRotateArgs& g_in, const Stream& s) {
  if (g_in.B <= 0) return cudaSuccess;
  if (g_in.B > 0x7FFFFFFFLL) return cudaErrorInvalidConfiguration;
  BlindRotateArgs g = g_in;
  const unsigned grid = static_cast<unsigned>(g.B);
  const bool multi_bit = g.grouping > 1;
  // small batches: the cluster path; then fused where it fits (the CPU's rules, tfhe_cluster_fits
  // and tfhe_fused_fits, and this device's opt-in limit)
  cudaError_t err = cudaSuccess;
  if (tfhe_cluster_fits(g) || tfhe_fused_fits(g.r)) {
    FusedDevice d{};
    FT_TRY(fused_device(&d));
    const int64_t cluster_smem = cluster_smem_bytes(g.r, multi_bit);
    if (tfhe_cluster_fits(g) && cluster_smem <= d.smem_limit) {
      const int teams = 2 * g.r.k1;
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(static_cast<unsigned>(g.B * teams));
      cfg.blockDim = dim3(kClusterTeam);
      cfg.dynamicSmemBytes = static_cast<size_t>(cluster_smem);
      cfg.stream = s.stream;
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = static_cast<unsigned>(teams);
      attr[0].val.clusterDim.y = 1;
      attr[0].val.clusterDim.z = 1;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
      g.scratch = nullptr;
      return multi_bit ? cudaLaunchKernelEx(&cfg, blind_rotate_cluster_kernel<true>, g)
                       : cudaLaunchKernelEx(&cfg, blind_rotate_cluster_kernel<false>, g);
    }
    const int64_t smem = tfhe_fused_bytes(g.r) + (multi_bit ? kTfheRotBytes : 0);
    if (tfhe_fused_fits(g.r) && smem <= d.smem_limit) {
      g.scratch = nullptr;  // the block's own shared memory
      const bool small = g.B <= d.sms;
      if (multi_bit && small)
        blind_rotate_fused_kernel<kFusedSmallBatchTeam, true><<<grid, kFusedSmallBatchTeam, smem, s.stream>>>(g);
      else if (multi_bit)
        blind_rotate_fused_kernel<kFusedTeam, true><<<grid, kFusedTeam, smem, s.stream>>>(g);
      else if (small)
        blind_rotate_fused_kernel<kFusedSmallBatchTeam, false><<<grid, kFusedSmallBatchTeam, smem, s.stream>>>(g);
      else
        blind_rotate_fused_kernel<kFusedTeam, false><<<grid, kFusedTeam, smem, s.stream>>>(g);
      return cudaGetLastError();
    }
  }
  g.scratch = s.scratch(g.B * tfhe_scratch_words(g.r));
  blind_rotate_init_kernel<<<grid, kTeam, 0, s.stream>>>(g);
  err = cudaGetLastError();
  const int steps = tfhe_rotate_steps(g);
  for (int i = 0; i < steps && err == cudaSuccess; ++i) {
    if (multi_bit)
      rotate_step_kernel<true><<<grid, kTeam, 0, s.stream>>>(g, i);
    else
      rotate_step_kernel<false><<<grid, kTeam, 0, s.stream>>>(g, i);
    err = cudaGetLastError();
  }
  return err;
}

}  // namespace fhetorch::cuda

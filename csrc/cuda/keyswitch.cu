// The fused key-switching ops on the GPU: mod_up and mod_up_keyswitch_inner
// (mod_up_core.cuh, keyswitch_inner_core.cuh) and switch_modulus (switch_modulus_core.cuh),
// run by the CUDA executor of program.cuh; tests/cuda_emu/emu.cu runs the same pipelines on
// the host. Scratch comes from the caller (the caching allocator).
#include "kernels.h"
#include "keyswitch_inner_core.cuh"
#include "switch_modulus_core.cuh"

namespace fhetorch::cuda {

cudaError_t mod_up(const ModUpArgs& g, int32_t* out, const Stream& s) {
  CudaExec ex{s.stream};
  return run_mod_up(ex, g, nullptr, out, s.scratch(mod_up_scratch_t(g)), nullptr);
}

cudaError_t mod_up_keyswitch_inner(const ModUpArgs& g, const KeyArgs& key, int32_t* out, const Stream& s) {
  CudaExec ex{s.stream};
  return run_mod_up(ex, g, &key, out, s.scratch(mod_up_scratch_t(g)), s.scratch(mod_up_scratch_d(g)));
}

cudaError_t switch_modulus(const SwitchArgs& g, int32_t* out, const Stream& s) {
  CudaExec ex{s.stream};
  return run_switch_modulus(ex, g, out, s.scratch(switch_scratch_t(g)), s.scratch(switch_scratch_y(g)));
}

}  // namespace fhetorch::cuda

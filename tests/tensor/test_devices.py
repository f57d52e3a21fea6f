"""Moving contexts and EncryptedTensors between CPU and CUDA (run on the GPU machine)."""
import pytest
import torch

import fhetorch as fhe


@pytest.mark.cuda
def test_cpu_to_cuda_and_back(ctx_n12):
    cpu = ctx_n12.to("cpu")
    x = torch.rand(300, dtype=torch.float64) * 2 - 1
    ex = cpu.encrypt(x)
    gx = ex.to("cuda")
    assert gx.device.type == "cuda" and gx.ctx is cpu.to("cuda")
    gz = torch.roll(gx * gx + 0.25, 3)  # computed on the GPU
    z_gpu = gx.ctx.decrypt(gz)
    z_cpu = cpu.decrypt(gz.to("cpu"))
    ref = torch.roll(x * x + 0.25, 3)
    # the residues are bit-identical; the float decoding (FFT) may round differently per device
    assert (z_gpu.cpu() - z_cpu).abs().max().item() < 1e-12
    assert (z_cpu - ref).abs().max().item() < 1e-6


@pytest.mark.cuda
def test_cuda_and_cpu_compute_identical_ciphertexts(ctx_n12):
    """The kernels are bit-identical: the same ciphertext evaluated on both devices matches."""
    cpu = ctx_n12.to("cpu")
    ex = cpu.encrypt(torch.rand(2048, dtype=torch.float64))
    a = (ex * ex).rotate(5)
    b = (ex.to("cuda") * ex.to("cuda")).rotate(5).to("cpu")
    assert torch.equal(a.ciphertext.data, b.ciphertext.data) and a.scale == b.scale


def test_operands_on_different_devices_are_an_error(ctx_n12):
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    ex = ctx_n12.encrypt(torch.rand(8, dtype=torch.float64))
    with pytest.raises(fhe.ContextError):
        ex.to("cpu") + ex.to("cuda")

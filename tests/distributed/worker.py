"""One rank of tests/distributed/test_gloo.py's job, started by torchrun (gloo on CPUs):

    python -m torch.distributed.run --standalone --nproc-per-node 2 tests/distributed/worker.py DIR

NCCL on the GPUs where CUDA is visible (one per rank), else gloo on the CPU. DIR holds what the test's single process made (fhe.save files: the client contexts, the
ciphertexts, the model's weights and calibration inputs); each rank writes its results to
DIR/rank{r}.pt (on the CPU) for the test to compare with the single-process run, bit for bit
(which ran on the CPU: the kernels give the same bits on both devices).
"""
import os
import sys
import warnings

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import fhetorch as fhe  # noqa: E402
from fhetorch._ring import Sampler  # noqa: E402
from models.helr import EncryptedHELR, HELRConfig  # noqa: E402
from tests.distributed import scenarios  # noqa: E402


def main(folder: str):
    dev = fhe.distributed.init_process_group()
    rank, size = dist.get_rank(), dist.get_world_size()
    out = {"rank": rank, "size": size}
    warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
    p = lambda name: os.path.join(folder, name)  # noqa: E731

    # randomness: the same test seed on every rank, still different streams
    out["seeded_draw"] = Sampler("cpu", seed=1234).uniform(fhe.Context("toy-n10").basis(0), 1, 64)

    # TFHE: keys shared from rank 0's client context, a circuit's waves split over the ranks
    client = fhe.load(p("tfhe_client.pt"), device=dev) if rank == 0 else None
    tctx = fhe.distributed.share_context(client, p("tfhe_server.pt"))
    assert (rank == 0) == tctx.has_secret_key
    tctx = tctx.public() if rank == 0 else tctx
    tctx.distribute()
    x, y = (fhe.load(p(f"tfhe_{v}.pt"), tctx) for v in ("x", "y"))
    out["circuit"] = [o.data for o in scenarios.tfhe_circuit(x, y)]
    try:  # ranks that disagree on the batch are refused, not mixed
        tctx.apply_lut(x if rank == 0 else y, scenarios.tfhe_luts()[0])
        out["mismatch"] = "no error"
    except fhe.DistributedError as e:
        out["mismatch"] = str(e)

    # data parallel inference: the inputs on rank 0 shared out, the outputs gathered back
    cm = scenarios.vector_model(torch.load(p("model.pt")), dev)
    client = fhe.load(p("ckks_client.pt"), device=dev) if rank == 0 else None
    ctx = fhe.distributed.share_context(client, p("ckks_server.pt"))
    cm.use_context(ctx)  # keys made once, by the test's client: none here
    inputs = [fhe.load(p(f"input{i}.pt"), ctx) for i in range(scenarios.INPUTS)] if rank == 0 else None
    outs = fhe.distributed.run_sharded(cm, inputs, ctx)
    if rank == 0:
        out["inference"] = [o.ciphertext.data for o in outs]

    # HELR: the data's ciphertexts sharded, the gradients all-reduced
    client = fhe.load(p("helr_client.pt"), device=dev) if rank == 0 else None
    hctx = fhe.distributed.share_context(client, p("helr_server.pt"))
    z, w0, v0 = (fhe.load(p(f"helr_{v}.pt"), hctx) for v in ("z", "w0", "v0"))
    cfg = HELRConfig(iterations=scenarios.HELR_ITERATIONS)
    enc = EncryptedHELR(hctx, z, cfg, samples=scenarios.HELR_SAMPLES, weights=(w0, v0), distributed=True)
    for _ in range(cfg.iterations):
        enc.step()
    out["helr"] = (enc.w.data, enc.v.data, enc.bootstraps, enc.z.count)
    if rank == 0:  # the same training on this rank's device alone (GPU encodings differ from the CPU's)
        alone = EncryptedHELR(hctx, z, cfg, samples=scenarios.HELR_SAMPLES, weights=(w0, v0))
        for _ in range(cfg.iterations):
            alone.step()
        out["helr_alone"] = (alone.w.data, alone.v.data)
    out["backend"] = dist.get_backend()
    sent = fhe.distributed.broadcast(z if rank == 0 else None, hctx)
    lwe = fhe.distributed.broadcast(x if rank == 0 else None, tctx)
    out["broadcast"] = (torch.equal(sent.ciphertext.data, z.ciphertext.data) and sent.shape == z.shape
                        and (sent.level, sent.scale) == (z.level, z.scale),
                        torch.equal(lwe.data, x.data) and (lwe.degree, lwe.noise_level) == (x.degree, x.noise_level))
    out["all_reduce"] = fhe.distributed.all_reduce(fhe.load(p(f"sum{rank}.pt"), hctx)).ciphertext.data
    torch.save(_cpu(out), p(f"rank{rank}.pt"))
    dist.destroy_process_group()


def _cpu(v):
    if isinstance(v, torch.Tensor):
        return v.cpu()
    if isinstance(v, (list, tuple)):
        return type(v)(_cpu(x) for x in v)
    if isinstance(v, dict):
        return {k: _cpu(x) for k, x in v.items()}
    return v


if __name__ == "__main__":
    main(sys.argv[1])

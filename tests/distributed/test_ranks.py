"""fhetorch.distributed on two CPU processes (torchrun, gloo), and on two GPUs (NCCL, cuda marker),
against one CPU process, bit for bit.

One torchrun job (tests/distributed/worker.py) runs every scenario on 2 ranks from files this
test's single process made (keys, ciphertexts, model weights); each test then compares one
scenario's results with the same computation in this process:
- a TFHE circuit's waves split over the ranks = the circuit on one process, on every rank;
- data parallel inference of a compiled model (inputs on rank 0 shared out, outputs gathered
  back in order) = the model run on each input here; the ranks used keys loaded from one saved
  public context (share_context), none regenerated;
- HELR with the data's ciphertexts sharded and gradients all-reduced = HELR on one process,
  and the weights equal on both ranks; all_reduce = the sum of the ranks' tensors;
- broadcast: rank 0's EncryptedTensor and LWETensor on every rank, as they are;
- randomness: two ranks with the same test seed still draw different streams;
- ranks that pass different ciphertexts to a sharded PBS get DistributedError.
"""
import json
import os
import subprocess
import sys
import warnings

import pytest
import torch

import fhetorch as fhe
from fhetorch._ckks import evaluator as ev
from fhetorch._ring import Sampler
from models.helr import EncryptedHELR, HELRConfig

from . import scenarios

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module", params=["gloo", pytest.param("nccl", marks=pytest.mark.cuda)])
def job(request, tmp_path_factory):
    """(the single process's results, rank 0's and rank 1's results): gloo on two CPU processes,
    or NCCL on two GPUs (cuda marker; needs two) against the same single CPU process."""
    gpus = request.param == "nccl"
    if gpus and torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA GPUs")
    d = tmp_path_factory.mktemp("distributed")
    p = lambda name: str(d / name)  # noqa: E731
    gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    mine = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        # TFHE
        tctx = fhe.tfhe.Context(scenarios.tfhe_params()).keygen()
        x, y = (tctx.encrypt(torch.randint(0, 4, scenarios.TFHE_SHAPE, generator=gen)) for _ in range(2))
        fhe.save(tctx, p("tfhe_client.pt"), secret_key=True)
        fhe.save(x, p("tfhe_x.pt"))
        fhe.save(y, p("tfhe_y.pt"))
        mine["circuit"] = [o.data for o in scenarios.tfhe_circuit(x, y)]
        mine["tfhe"] = (tctx, x, y)
        # inference
        saved = {"state": torch.nn.Sequential(torch.nn.Linear(10, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3)).state_dict(),
                 "calibration": torch.randn(64, 10, generator=gen)}
        torch.save(saved, p("model.pt"))
        cm = scenarios.vector_model(saved)
        ctx = cm.keygen()
        fhe.save(ctx, p("ckks_client.pt"), secret_key=True)
        xs = [cm.encrypt(torch.randn(1, 10, generator=gen) * 0.5) for _ in range(scenarios.INPUTS)]
        for i, ex in enumerate(xs):
            fhe.save(ex, p(f"input{i}.pt"))
        mine["inference"] = [cm(ex).ciphertext.data for ex in xs]
        mine["cm"] = cm
        # HELR
        n, f = scenarios.HELR_SAMPLES, scenarios.HELR_FEATURES
        xz = torch.cat([torch.rand(n, f, generator=gen, dtype=torch.float64), torch.ones(n, 1, dtype=torch.float64)], 1)
        z = xz * torch.where(torch.rand(n, generator=gen) > 0.5, 1.0, -1.0).to(torch.float64)[:, None]
        hctx = EncryptedHELR.keygen(fhe.Context("toy-n13-bts"), *z.shape)
        cfg = HELRConfig(iterations=scenarios.HELR_ITERATIONS)
        enc = EncryptedHELR(hctx, z, cfg)
        fhe.save(hctx, p("helr_client.pt"), secret_key=True)
        fhe.save(enc.z, p("helr_z.pt"))
        for name, ct in (("w0", enc.w), ("v0", enc.v)):
            fhe.save(fhe.EncryptedTensor(hctx, ct, (hctx.slots,)), p(f"helr_{name}.pt"))
        for _ in range(cfg.iterations):
            enc.step()
        mine["helr"] = (enc.w.data, enc.v.data, enc.bootstraps, enc.z.count)
        parts = [hctx.encrypt(torch.rand(100, generator=gen, dtype=torch.float64)) for _ in range(2)]
        for r, part in enumerate(parts):
            fhe.save(part, p(f"sum{r}.pt"))
        mine["sum"] = ev.add(hctx, parts[0].ciphertext, parts[1].ciphertext).data
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT, NCCL_NVLS_ENABLE="0",
               TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    if not gpus:
        env["CUDA_VISIBLE_DEVICES"] = ""  # gloo on the CPUs even where GPUs are
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        os.path.join(ROOT, "tests", "distributed", "worker.py"), str(d)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"torchrun failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    return mine, torch.load(p("rank0.pt")), torch.load(p("rank1.pt"))


def test_ranks_draw_different_streams_from_one_seed(job):
    _, r0, r1 = job
    assert (r0["rank"], r1["rank"], r0["size"]) == (0, 1, 2)
    assert not torch.equal(r0["seeded_draw"], r1["seeded_draw"])
    # rank 0's streams are one process's: the rank is the stream number's high bits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        basis = fhe.Context("toy-n10").basis(0)
    assert torch.equal(r0["seeded_draw"], Sampler("cpu", seed=1234).uniform(basis, 1, 64))


def test_tfhe_waves_split_over_ranks_bit_identical(job):
    mine, r0, r1 = job
    for theirs in (r0["circuit"], r1["circuit"]):  # every rank holds the whole result
        assert len(theirs) == len(mine["circuit"])
        for a, b in zip(mine["circuit"], theirs):
            assert torch.equal(a, b)
    tctx, x, y = mine["tfhe"]
    out = scenarios.tfhe_circuit(x, y)
    assert scenarios.tfhe_circuit.stats["waves"] == 2 and scenarios.tfhe_circuit.stats["luts_per_wave"] == [2, 1]
    xv, yv = tctx.decrypt(x, carries=True), tctx.decrypt(y, carries=True)
    a = (3 * xv + 1) % 4
    assert torch.equal(tctx.decrypt(out[1]), a)
    assert torch.equal(tctx.decrypt(out[0]), torch.clamp(a + (yv + 2) % 4, max=3))


def test_ranks_with_different_batches_are_refused(job):
    _, r0, r1 = job
    for r in (r0, r1):
        assert "disagree" in r["mismatch"], r["mismatch"]


def test_data_parallel_inference_bit_identical_in_order(job):
    mine, r0, _ = job
    assert len(r0["inference"]) == scenarios.INPUTS
    for a, b in zip(mine["inference"], r0["inference"]):
        assert torch.equal(a, b)


def test_helr_sharded_gradients_bit_identical(job):
    """= HELR on rank 0's device alone, on both ranks; on CPUs also = this process's HELR (on GPUs
    the plaintext encodings' float rounding differs from the CPU's, so the bits do too)."""
    mine, r0, r1 = job
    w, v, boots, count = mine["helr"]
    assert count == 2 and boots >= 1
    alone = r0["helr_alone"]
    for r in (r0, r1):
        rw, rv, rboots, rcount = r["helr"]
        assert rcount == 1 and rboots == boots  # one data ciphertext each; the same bootstraps
        assert torch.equal(rw, alone[0]) and torch.equal(rv, alone[1])
        if r["backend"] == "gloo":
            assert torch.equal(rw, w) and torch.equal(rv, v)


def test_broadcast_replicates_rank_0s_tensors(job):
    _, r0, r1 = job
    assert r0["broadcast"] == r1["broadcast"] == (True, True)


def test_all_reduce_is_the_sum(job):
    mine, r0, r1 = job
    assert torch.equal(r0["all_reduce"], mine["sum"]) and torch.equal(r1["all_reduce"], mine["sum"])


def test_use_context_checks_the_keys():
    """A server context missing one of the model's keys is refused at binding, naming it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        saved = {"state": torch.nn.Sequential(torch.nn.Linear(10, 4), torch.nn.ReLU(),
                                              torch.nn.Linear(4, 3)).state_dict(),
                 "calibration": torch.randn(64, 10)}
        cm = scenarios.vector_model(saved)
        bare = fhe.Context("toy-n10").keygen()  # relinearisation and +-2^i rotations only
        steps = sorted(cm.program().rotations())
        if all(s & (s - 1) == 0 for s in map(abs, steps)):
            pytest.skip("the plan uses power-of-two rotations only")
        with pytest.raises(fhe.MissingKeyError, match="rotation key for step"):
            cm.use_context(bare.public())
        with pytest.raises(fhe.ParameterError, match="compiled for toy-n10"):
            cm.use_context(fhe.Context("toy-n12"))
        full = cm.keygen()
        assert cm.use_context(full.public()) is not None


def test_without_a_process_group_it_says_so():
    with pytest.raises(fhe.DistributedError, match="init_process_group"):
        fhe.distributed.scatter([], None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        with pytest.raises(fhe.DistributedError, match="not initialised"):
            fhe.tfhe.Context("toy-tfhe-2bit").distribute()


def test_benchmark_suite_runs_on_two_cpu_ranks(tmp_path):
    """`torchrun ... -m benchmarks --suite distributed --quick`: rank 0 writes the JSON; the wave
    on two ranks equals the wave on one, and is correct."""
    path = tmp_path / "distributed.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m",
                        "benchmarks", "--suite", "distributed", "--quick", "--ops", "pbs", "--json", str(path)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"torchrun failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    doc = json.loads(path.read_text())
    assert doc["ranks"] == 2 and doc["pbs"]["equal_to_one_gpu"] and doc["pbs"]["one_gpu_correct"]

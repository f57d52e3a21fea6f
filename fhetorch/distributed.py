"""fhetorch.distributed: encrypted work spread over several GPUs through torch.distributed.

The engine is PyTorch's own (NCCL between GPUs, gloo between CPUs; one process per GPU, as
torchrun starts them); fhetorch adds what ciphertexts need on top of it:

- `share_context`: one saved public context, loaded by every rank onto its own device: each
  rank holds the evaluation keys, none the secret key, and no rank makes keys of its own.
- `scatter` / `gather` / `run_sharded`: a batch of encrypted inputs (EncryptedTensors or
  LWETensors) on one rank shared out, rank r taking inputs r, r + p, ... (fhetorch/_distributed.py),
  each rank running fn on its share, the outputs gathered back in order (data parallel
  inference of fhe.nn compiled models). What crosses ranks is ciphertext data (by the backend:
  NCCL moves it GPU to GPU) and its description, never a secret key.
- `broadcast`: a ciphertext tensor on one rank replicated on every rank (the data as it is, by
  the backend's broadcast), e.g. a TFHE circuit's inputs, which every rank holds.
- `all_reduce`: an EncryptedTensor summed over the ranks (residues summed as int64, reduced mod
  each prime: the sum one process would compute, bit for bit): HELR's gradient over sharded data.
- `tfhe.Context.distribute(group)`: every batched PBS (a circuit's waves) split over the ranks.

Randomness stays unique per rank: every sampler's stream numbers carry the global rank
(fhetorch/_ring/sampler.py).

    torchrun --nproc-per-node 2 -m models.evaluate_resnet20 --encrypted 16 --distributed
"""
from __future__ import annotations

import atexit
import os
import tempfile

import torch
import torch.distributed as dist
from tqdm import tqdm

from ._distributed import check_group, global_rank, group_rank, group_size, shard
from ._tfhe.lwe_tensor import LWETensor
from ._ckks import evaluator as ev
from ._ckks.ciphertext import Ciphertext
from .errors import ContextError, DistributedError
from .serialization import load, save
from .tensor import EncryptedTensor


def device() -> torch.device:
    """This process's device: cuda:LOCAL_RANK (torchrun's variable, 0 when unset) where CUDA is
    available, else the CPU. Raises nothing."""
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    return torch.device("cpu")


def init_process_group(backend: str | None = None) -> torch.device:
    """torch.distributed.init_process_group from torchrun's environment, unless already done:
    NCCL where CUDA is available, else gloo (or `backend`); the CUDA device set to this rank's.
    A group made here is destroyed at exit if the program has not done so (a gloo group left to the
    interpreter's teardown aborts the process about half the time, after its work is done).
    Returns device(). Raises DistributedError outside torchrun (no RANK / WORLD_SIZE / MASTER_ADDR)."""
    d = device()
    if d.type == "cuda":
        torch.cuda.set_device(d)
    if not dist.is_initialized():
        missing = [v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if v not in os.environ]
        if missing:
            raise DistributedError(f"distributed.init_process_group: {', '.join(missing)} not set; start the "
                                   "program with torchrun (e.g. torchrun --nproc-per-node 2 -m ...)")
        kw = {"device_id": d} if d.type == "cuda" else {}
        dist.init_process_group(backend or ("nccl" if d.type == "cuda" else "gloo"), **kw)
        atexit.register(_destroy_at_exit)
    return d


def _destroy_at_exit():
    if dist.is_initialized():
        dist.destroy_process_group()


def share_context(ctx, path=None, *, group=None, src: int = 0):
    """One set of evaluation keys for every rank: on rank `src`, ctx (a client context after
    keygen, CKKS or TFHE) is saved without its secret key to `path`, a file every rank can read
    (None: a temporary file, in /dev/shm where there is one, removed once every rank has read it:
    one machine's ranks); every other rank loads it onto its own device (device()) and gets that
    server context; src gets ctx back. Collective: every rank of the group calls it (ctx is
    ignored off src).

    Raises DistributedError without an initialised torch.distributed, what fhe.save and fhe.load
    raise (SerializationError) for a context that cannot be saved or a file that cannot be read."""
    check_group(group, "distributed.share_context")
    rank = group_rank(group)
    temporary = path is None
    if temporary:
        name = [None]
        if rank == src:
            fd, name[0] = tempfile.mkstemp(prefix="fhetorch-context-", suffix=".pt",
                                           dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
            os.close(fd)
        dist.broadcast_object_list(name, src=global_rank(group, src), group=group)
        path = name[0]
    if rank == src:
        save(ctx, path)  # fhe.save never writes a secret key unless asked to
    dist.barrier(group=group)
    out = ctx if rank == src else load(path, device=device())
    dist.barrier(group=group)  # every rank has read the file
    if temporary and rank == src:
        os.remove(path)
    return out


def _describe(x, what: str) -> tuple:
    """What rebuilds x on another rank around its data: (scheme, data shape, key id, fields)."""
    if isinstance(x, EncryptedTensor):
        ct = x.ciphertext
        return ("ckks", tuple(ct.data.shape), x.ctx.key_id, ct.level, ct.scale, ct.slots, tuple(x.shape),
                x.is_complex(), x.layout)
    if isinstance(x, LWETensor):
        return ("tfhe", tuple(x.data.shape), x.context.key_id, x.degree, x.noise_level)
    raise ContextError(f"{what}: expected EncryptedTensors or LWETensors, got {type(x).__name__}")


def _data(x) -> torch.Tensor:
    return (x.ciphertext.data if isinstance(x, EncryptedTensor) else x.data).contiguous()


def _empty(desc: tuple, ctx, what: str) -> torch.Tensor:
    if desc[2] != ctx.key_id:
        raise ContextError(f"{what}: the ciphertexts were made under other keys than this rank's context; load the "
                           "public context of the keys they use (share_context)")
    return torch.empty(desc[1], dtype=torch.int32 if desc[0] == "ckks" else torch.int64, device=ctx.device)


def _rebuild(desc: tuple, data: torch.Tensor, ctx):
    if desc[0] == "tfhe":
        return LWETensor(ctx, data, *desc[3:])
    level, scale, slots, shape, cplx, layout = desc[3:]
    return EncryptedTensor(ctx, Ciphertext(data, level, scale, slots), shape, cplx, layout)


def _exchange(sends: list, recvs: list, group):
    """Point-to-point: sends [(tensor, peer)], recvs [(tensor, peer)] (peers as ranks of group), all at once."""
    ops = [dist.P2POp(dist.isend, t, global_rank(group, r), group) for t, r in sends]
    ops += [dist.P2POp(dist.irecv, t, global_rank(group, r), group) for t, r in recvs]
    if ops:
        for w in dist.batch_isend_irecv(ops):
            w.wait()


def scatter(inputs, ctx, *, group=None, src: int = 0) -> list:
    """This rank's share of rank src's list of encrypted inputs: inputs r, r + p, ... for rank r
    of p, on this rank's context ctx (src keeps its own objects). Their descriptions go by one
    object scatter, their data by the backend (NCCL: GPU to GPU), as they are: the ranks of one
    job trust each other (a server taking ciphertexts from outside loads them with fhe.load, which
    checks them). Collective; `inputs` is read on src only.

    Raises DistributedError without an initialised torch.distributed, ContextError for inputs
    that are not EncryptedTensors or LWETensors, or that belong to other keys than ctx's."""
    check_group(group, "distributed.scatter")
    rank, size = group_rank(group), group_size(group)
    sends = []
    if rank == src:
        inputs = list(inputs)
        shares = [inputs[shard(len(inputs), r, size)] for r in range(size)]
        descs = [[_describe(x, "distributed.scatter") for x in share] if r != src else []
                 for r, share in enumerate(shares)]
        sends = [(_data(x), r) for r in range(size) if r != src for x in shares[r]]
    got = [None]
    dist.scatter_object_list(got, descs if rank == src else None, src=global_rank(group, src), group=group)
    if rank == src:
        _exchange(sends, [], group)
        return shares[src]
    bufs = [_empty(d, ctx, "distributed.scatter") for d in got[0]]
    _exchange([], [(b, src) for b in bufs], group)
    return [_rebuild(d, b, ctx) for d, b in zip(got[0], bufs)]


def gather(outputs, ctx, *, group=None, dst: int = 0) -> list | None:
    """Every rank's outputs (of its share, in order) back on rank dst as one list in the order of
    the inputs scatter shared out, under dst's context ctx; None on the other ranks. Descriptions
    by one object gather, data by the backend, as in scatter. Collective.

    Raises DistributedError without an initialised torch.distributed or for a rank returning
    another number of outputs than its share of inputs, ContextError for outputs that are not
    EncryptedTensors or LWETensors or belong to other keys than ctx's."""
    check_group(group, "distributed.gather")
    rank, size = group_rank(group), group_size(group)
    outputs = list(outputs)
    mine = [_describe(y, "distributed.gather") for y in outputs] if rank != dst else []
    every = [None] * size if rank == dst else None
    dist.gather_object(mine, every, dst=global_rank(group, dst), group=group)
    if rank != dst:
        _exchange([(_data(y), dst) for y in outputs], [], group)
        return None
    bufs = {r: [_empty(d, ctx, "distributed.gather") for d in every[r]] for r in range(size) if r != dst}
    _exchange([], [(b, r) for r, bs in bufs.items() for b in bs], group)
    parts = [outputs if r == dst else [_rebuild(d, b, ctx) for d, b in zip(every[r], bufs[r])] for r in range(size)]
    n = sum(len(p) for p in parts)
    out = [None] * n
    for r, part in enumerate(parts):
        span = range(n)[shard(n, r, size)]
        if len(span) != len(part):
            raise DistributedError(f"distributed.gather: rank {r} returned {len(part)} outputs for its {len(span)} "
                                   "inputs; fn must return one output per input")
        for i, y in zip(span, part):
            out[i] = y
    return out


def run_sharded(fn, inputs, ctx, *, group=None, src: int = 0, progress: bool = False) -> list | None:
    """Data parallel encrypted work: rank src's inputs shared out (scatter), fn applied by each
    rank to each input of its share (e.g. a compiled model bound to this rank's server context:
    cm.use_context(ctx)), the outputs gathered back to src in the inputs' order (None on the other
    ranks). progress: a tqdm bar of src's share. Collective.

    Raises what scatter, fn and gather raise (DistributedError, ContextError)."""
    share = scatter(inputs, ctx, group=group, src=src)
    show = progress and group_rank(group) == src
    outs = [fn(x) for x in tqdm(share, desc=f"encrypted, {group_size(group)} ranks", unit="input", disable=not show)]
    return gather(outs, ctx, group=group, dst=src)


def broadcast(x, ctx, *, group=None, src: int = 0):
    """Rank src's EncryptedTensor or LWETensor on every rank, under this rank's context ctx: its
    description by an object broadcast, its data by the backend's broadcast, as it is (see
    scatter). Collective; `x` is read on src only, which gets x back.

    Raises DistributedError without an initialised torch.distributed, ContextError for anything
    but an EncryptedTensor or LWETensor on src, or one of other keys than ctx's."""
    check_group(group, "distributed.broadcast")
    rank = group_rank(group)
    desc = [_describe(x, "distributed.broadcast") if rank == src else None]
    dist.broadcast_object_list(desc, src=global_rank(group, src), group=group)
    data = _data(x) if rank == src else _empty(desc[0], ctx, "distributed.broadcast")
    dist.broadcast(data, src=global_rank(group, src), group=group)
    return x if rank == src else _rebuild(desc[0], data, ctx)


def all_reduce(x: EncryptedTensor, *, group=None) -> EncryptedTensor:
    """x summed over the ranks of the group, every rank getting the sum (as torch.distributed's
    all_reduce with SUM): bit for bit what adding the ranks' tensors in one process gives.

    Raises DistributedError without an initialised torch.distributed or for ranks whose tensors
    differ in shape, level, scale or slots, ContextError for anything but an EncryptedTensor."""
    if not isinstance(x, EncryptedTensor):
        raise ContextError(f"distributed.all_reduce: expected an EncryptedTensor, got {type(x).__name__}")
    check_group(group, "distributed.all_reduce")
    return EncryptedTensor(x.ctx, ev.sum_ranks(x.ctx, x.ciphertext, group), x.shape, x.is_complex(), x.layout)


__all__ = ["all_reduce", "broadcast", "device", "gather", "init_process_group", "run_sharded", "scatter",
           "share_context"]

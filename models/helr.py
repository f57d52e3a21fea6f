"""HELR: logistic regression trained on encrypted data (Han et al. 2019; Kim et al. 2018).

Mini-batch Nesterov accelerated gradient on encrypted data and encrypted weights:

    w_(t+1) = v_t + (gamma_t / n) sum_i sigma(-z_i . v_t) z_i        (z_i = y_i x_i, y_i = +-1)
    v_(t+1) = (1 - eta_t) w_(t+1) + eta_t w_t

with sigma HELR's degree-3 least-squares sigmoid on [-8, 8], gamma_t = gamma0 / (t + 1) and
the usual NAG schedule eta_t = (1 - lambda_t) / lambda_(t+1).

Packing (the paper's): the batch Z (rows x features, features padded to a power of two f) row
by row in the slots, `rows_per_ct` rows per ciphertext: one EncryptedTensor of shape
(rows, f) spanning several ciphertexts for larger batches (1024 x 256 is 8 ciphertexts at
2^15 slots); the weights replicated in every row.
One iteration, on each Z ciphertext:
  a = Z * V                         1 level
  row sums (log2 f rotations), times a mask with 1/B at each row's first slot: 1 level
  replicate along the row (log2 f rotations)
  g = q(a), q(y) = sigma(-B y) / (n S): degree 3 on [-1, 1]: 2 levels
  b = g * Z                         1 level
  the sum over the ciphertexts, then column sums (rotations by f, 2f, ...) once: G
then w' = v + gamma G and v' = (1 - eta) v + (1 - eta) gamma G + eta w, each one level
(computed side by side): 6 levels per iteration. The gradient part has no per-iteration
constant, so on CUDA it is captured in a CUDA graph once per input level and replayed, as is
the bootstrapping of (w, v).
Weights are carried divided by S (`weight_bound`) so that bootstrapping, which needs values
in [-1, 1], can refresh them; w and v are bootstrapped together as one complex ciphertext
(`bootstrap_pair`) where fhetorch.nn's planner puts the bootstraps (`plan_iterations`: one
layer per iteration; it refreshes the pair when the next iteration would not fit), as a
sparse packing of f slots (they repeat every row; keys: EncryptedHELR.keygen).

`PlainHELR` runs the identical algorithm (same polynomial, same order) in float64, in
lock-step, for the tests. `load_digits_3v8()` gives scikit-learn's digits, 3 versus 8.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from fhetorch import EncryptedTensor
from fhetorch.circuits import bootstrap as _bts
from fhetorch._distributed import check_same, checksum, global_rank, group_rank, group_size, shard
from fhetorch.circuits.polynomial import evaluate
from fhetorch._ckks import evaluator as ev
from fhetorch._ckks.graphs import Graphs
from fhetorch.ckks.polynomial import chebyshev, sigmoid
from fhetorch.nn.graph import Layer
from fhetorch.errors import DistributedError, ShapeError
from fhetorch.nn.plan import make_plan

LEVELS_PER_ITERATION = 6


def load_digits_3v8(seed: int = 0, test_fraction: float = 0.3):
    """(X_train, y_train, X_test, y_test): scikit-learn's 8x8 digits 3 (y = -1) and 8 (y = +1),
    pixels / 16 in [0, 1] plus a bias feature of 1; a seeded 70/30 split."""
    from sklearn.datasets import load_digits

    d = load_digits()
    keep = (d.target == 3) | (d.target == 8)
    x = torch.tensor(d.data[keep] / 16.0, dtype=torch.float64)
    x = torch.cat([x, torch.ones(x.shape[0], 1, dtype=torch.float64)], dim=1)
    y = torch.tensor(np.where(d.target[keep] == 8, 1.0, -1.0), dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(x.shape[0], generator=g)
    cut = int(round(x.shape[0] * (1 - test_fraction)))
    tr, te = perm[:cut], perm[cut:]
    return x[tr], y[tr], x[te], y[te]


def accuracy(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> float:
    return float(((x @ w[: x.shape[1]]).sign() == y).to(torch.float64).mean())


@dataclass
class HELRConfig:
    iterations: int = 8
    gamma0: float = 1.0
    sigmoid_bound: float = 8.0  # sigmoid's interval [-B, B]
    weight_bound: float = 4.0  # weights are carried divided by this (bootstrapping needs [-1, 1])

    def schedule(self):
        """[(gamma_t, eta_t)] for t = 0 .. iterations - 1."""
        lam, out = 1.0, []
        for t in range(self.iterations):
            lam_next = (1 + math.sqrt(1 + 4 * lam * lam)) / 2
            out.append((self.gamma0 / (t + 1), (1 - lam) / lam_next))
            lam = lam_next
        return out


class _Layout:
    """Rows x features (both powers of two) in ciphertexts of `slots` slots."""

    def __init__(self, n_rows: int, n_features: int, slots: int):
        self.f = 1 << max(0, (n_features - 1).bit_length())
        if self.f > slots:
            raise ValueError(f"HELR: {n_features} features do not fit {slots} slots")
        self.rows_per_ct = slots // self.f
        self.cts = max(1, math.ceil(n_rows / self.rows_per_ct))
        self.slots = slots

    def pack(self, z: torch.Tensor) -> list:
        """(n, d) -> [slot vectors], zero rows and columns as padding."""
        out = []
        for c in range(self.cts):
            block = torch.zeros(self.rows_per_ct, self.f, dtype=torch.float64)
            part = z[c * self.rows_per_ct : (c + 1) * self.rows_per_ct]
            block[: part.shape[0], : part.shape[1]] = part
            out.append(block.flatten())
        return out

    def replicate(self, w: torch.Tensor) -> torch.Tensor:
        v = torch.zeros(self.f, dtype=torch.float64)
        v[: w.numel()] = w
        return v.repeat(self.rows_per_ct)

    def row_mask(self, c: float) -> torch.Tensor:
        m = torch.zeros(self.rows_per_ct, self.f, dtype=torch.float64)
        m[:, 0] = c
        return m.flatten()

    def rotations(self) -> list:
        steps = [1 << k for k in range(self.f.bit_length() - 1)]  # row sums
        steps += [-s for s in steps]  # replication along the row
        steps += [self.f << k for k in range(self.rows_per_ct.bit_length() - 1)]  # column sums
        return steps


def _broadcast(v, z):
    """One ciphertext v repeated over z's batch (a multiplicand of every data ciphertext)."""
    if not z.batch_shape:
        return v
    return v.replace(data=v.data.expand(z.batch_shape + v.data.shape).contiguous())


def _gradient_poly(cfg: HELRConfig, n: int):
    """q(y) = sigma(-B y) / (n S) on [-1, 1], as a Chebyshev series (exact: a cubic)."""
    sig = sigmoid(3)
    k = 1.0 / n / cfg.weight_bound
    return chebyshev(lambda y: k * sig.plain(-cfg.sigmoid_bound * torch.as_tensor(y, dtype=torch.float64)),
                     (-1.0, 1.0), 3)


class PlainHELR:
    """The same iteration on float64 plaintext (lock-step reference)."""

    def __init__(self, z: torch.Tensor, cfg: HELRConfig, slots: int):
        self.cfg, self.n = cfg, z.shape[0]
        self.layout = _Layout(z.shape[0], z.shape[1], slots)
        self.z = self.layout.pack(z)
        self.w = torch.zeros(slots, dtype=torch.float64)
        self.v = torch.zeros(slots, dtype=torch.float64)
        self.q = _gradient_poly(cfg, self.n)
        self.t = 0

    def step(self):
        L, cfg, q = self.layout, self.cfg, self.q
        gamma, eta = cfg.schedule()[self.t]
        f, r = L.f, L.rows_per_ct
        grad = None
        for z in self.z:
            a = (z * self.v).view(r, f).sum(1) * cfg.weight_bound / cfg.sigmoid_bound  # z . v / B
            g = q.plain(a).repeat_interleave(f)
            b = (g * z).view(r, f).sum(0).repeat(r)
            grad = b if grad is None else grad + b
        w_new = self.v + gamma * grad
        self.v = (1 - eta) * self.v + (1 - eta) * gamma * grad + eta * self.w
        self.w = w_new
        self.t += 1

    def weights(self) -> torch.Tensor:
        return self.w[: self.layout.f] * self.cfg.weight_bound


def plan_iterations(params, iterations: int):
    """Where training bootstraps, by fhetorch.nn's planner: one "op" layer of
    LEVELS_PER_ITERATION levels per iteration, reading the (w, v) pair as one value (they are
    refreshed together, as one complex ciphertext)."""
    layers = [Layer("wv0", "input", "input", [], ())]
    for t in range(iterations):
        layers.append(Layer(f"wv{t + 1}", "op", "helr_iteration", [f"wv{t}"], (), levels=LEVELS_PER_ITERATION))
    return make_plan(layers, params)


class EncryptedHELR:
    """HELR on ciphertexts of a CKKS context (keys: rotations(), and bootstrapping keys)."""

    def __init__(self, ctx, z, cfg: HELRConfig, *, samples: int | None = None, weights=None,
                 distributed: bool = False, group=None):
        """z: the batch (n, d) in plaintext (encrypted here), or already encrypted, an EncryptedTensor
        of the packed (rows, f) batch (then `samples` is n). weights: the encrypted starting (w, v)
        (default: encryptions of zero).

        distributed=True shares the data out over the ranks of a torch.distributed process group
        (group; None: the default one): rank r keeps the batch's ciphertexts r, r + p, ... (of a
        plaintext z it encrypts only those), each iteration's gradient sums its own and the ranks'
        sums are all-reduced (fhetorch.distributed's residue sum), so the weights, computed alike
        on every rank from rank 0's starting ones, are the same on every rank and bit for bit those
        of one process on the same ciphertexts. Raises DistributedError with fewer ciphertexts
        than ranks, or ranks whose starting weights or shapes differ."""
        self.ctx, self.cfg = ctx, cfg
        encrypted = isinstance(z, EncryptedTensor)
        self.n = samples if encrypted else z.shape[0]
        if self.n is None:
            raise ShapeError("HELR: an encrypted batch needs samples= (the number of real samples)")
        rows, feats = z.shape
        self.layout = L = _Layout(rows, feats, ctx.slots)
        self.distributed, self.group = distributed, group
        rank, size = (group_rank(group), group_size(group)) if distributed else (0, 1)
        if L.cts < size:
            raise DistributedError(f"HELR: {L.cts} ciphertext(s) of data cannot be shared by {size} ranks; use fewer "
                                   "ranks or more samples")
        mine = shard(L.cts, rank, size)
        if encrypted:  # this rank's ciphertexts of the batch
            data = z.ciphertext.data if z.multi else z.ciphertext.data[None]
            part = data[mine]
            self.z = EncryptedTensor(ctx, z.ciphertext.replace(data=part[0] if part.shape[0] == 1 else part),
                                     (part.shape[0] * L.rows_per_ct, L.f))
        else:  # the padded batch (rows x f); 1024 x 256 spans 8 ciphertexts
            self.z = ctx.encrypt(torch.cat(L.pack(z)[mine]).view(-1, L.f))
        if weights is None:
            zero = torch.zeros(ctx.slots, dtype=torch.float64, device=ctx.device)
            weights = ctx.encrypt_vector(zero, slots=ctx.slots), ctx.encrypt_vector(zero, slots=ctx.slots)
            if distributed:  # one start for every rank: rank 0's encryptions
                for ct in weights:
                    dist.broadcast(ct.data, src=global_rank(group, 0), group=group)
        self.w, self.v = (c.ciphertext if isinstance(c, EncryptedTensor) else c for c in weights)
        if distributed:
            check_same([checksum(self.w.data), checksum(self.v.data), self.n, rows, feats], group,
                       "HELR", "the starting weights and the batch's shape")
        self.mask = L.row_mask(cfg.weight_bound / cfg.sigmoid_bound).to(ctx.device)
        self._q = _gradient_poly(cfg, self.n)
        self._mask_pt, self._z_levels, self._summed = {}, {}, set()
        self.graphs = Graphs(ctx.device.type == "cuda")
        self.plan = plan_iterations(ctx.params, cfg.iterations)
        self.t = 0
        self.bootstraps = 0

    @staticmethod
    def rotations(n_rows: int, n_features: int, slots: int) -> list:
        return _Layout(n_rows, n_features, slots).rotations()

    @staticmethod
    def keygen(ctx, n_rows: int, n_features: int):
        """Every key training needs (client side): the layout's rotations and the bootstrapping
        keys for the weights' period (f slots: see _refresh)."""
        layout = _Layout(n_rows, n_features, ctx.slots)
        return ctx.keygen(rotations=layout.rotations(), bootstrap=True, bootstrap_slots=[layout.f],
                          power_of_two_rotations=False)

    def _refresh(self):
        """Bootstrap w and v together where the plan says (self.plan: fhetorch.nn's planner over
        the iterations). Both repeat every f slots (the weights in every row), so they are an
        f-slot sparse packing: bootstrapped as such (SubSum, DFTs of f slots, one EvalMod) at a
        fraction of a full-slot bootstrap."""
        if self.t >= len(self.plan.steps) - 1:
            raise ValueError(f"HELR: planned for {self.cfg.iterations} iterations (HELRConfig.iterations)")
        if not self.plan.steps[self.t + 1].bootstraps:
            return
        f, full = self.layout.f, self.ctx.slots
        w, v = self.graphs("bootstrap", lambda w, v: _bts.bootstrap_pair(self.ctx, w, v),
                           self.w.replace(slots=f), self.v.replace(slots=f))
        self.w, self.v = w.replace(slots=full), v.replace(slots=full)
        self.bootstraps += 1

    def _gradient(self, v):
        """G = sum_i sigma(-z_i . v) z_i / (n S), replicated in every row (fixed constants)."""
        return self._column_sums(self._partial_gradient(v))

    def _partial_gradient(self, v):
        """The sum over this rank's data ciphertexts of sigma(-z_i . v) z_i / (n S), before the
        column sums. The data ciphertexts are one batch: every multiplication, rotation and
        polynomial step below acts on all of them in one kernel launch per step."""
        ctx, L = self.ctx, self.layout
        z = self._z_at(v.level)
        a = ev.mul(ctx, z, _broadcast(v, z))
        k = 1
        while k < L.f:  # row sums at each row's first slot
            a = ev.add(ctx, a, ev.rotate(ctx, a, k))
            k *= 2
        key = (a.level, a.scale)
        if key not in self._mask_pt:  # encoded outside any graph capture (the warm-up)
            self._mask_pt[key] = ev.encode_multiplicand(ctx, a, self.mask)
        a = ev.mul_plaintext(ctx, a, self._mask_pt[key])  # keep the sums, times S / B
        k = 1
        while k < L.f:  # back along the row
            a = ev.add(ctx, a, ev.rotate(ctx, a, -k))
            k *= 2
        g = evaluate(ctx, a, self._q.series)
        return ev.sum_batch(ctx, ev.mul(ctx, g, self._z_at(g.level)))

    def _column_sums(self, total):
        """The sums over the rows, replicated in every row (rotations by f, 2f, ...)."""
        k = self.layout.f
        while k < self.ctx.slots:
            total = ev.add(self.ctx, total, ev.rotate(self.ctx, total, k))
            k *= 2
        return total

    def _z_at(self, level: int):
        """The data ciphertexts at `level`, dropped once and kept (the data never changes)."""
        z = self._z_levels.get(level)
        if z is None:
            z = self.z.ciphertext
            z = self._z_levels[level] = ev.drop_level(self.ctx, z, z.level - level) if z.level > level else z
        return z

    def step(self):
        ctx, cfg = self.ctx, self.cfg
        gamma, eta = cfg.schedule()[self.t]
        self._refresh()
        if self.distributed:  # the ranks' partial sums all-reduced between two graphs
            part = self.graphs("partial", self._partial_gradient, self.v)
            first = (part.level, part.scale) not in self._summed  # the ranks' agreement checked once
            self._summed.add((part.level, part.scale))
            grad = self.graphs("columns", self._column_sums, ev.sum_ranks(ctx, part, self.group, check=first))
        else:
            grad = self.graphs("gradient", self._gradient, self.v)
        w_new = ev.add(ctx, self.v, ev.mul_scalar(ctx, grad, gamma))
        v_new = ev.add(ctx, ev.mul_scalar(ctx, self.v, 1 - eta), ev.mul_scalar(ctx, grad, (1 - eta) * gamma))
        if eta:
            v_new = ev.add(ctx, v_new, ev.mul_scalar(ctx, self.w, eta))
        self.v, self.w = v_new, w_new
        self.t += 1
        if min(self.w.level, self.v.level) < self.plan.steps[self.t].level_out:
            raise RuntimeError("HELR: an iteration used more levels than LEVELS_PER_ITERATION (a bug)")

    def weights(self) -> torch.Tensor:
        """Decrypted weights (client side)."""
        v = self.ctx.decrypt_vector(self.w).real.to(torch.float64).cpu()
        return v[: self.layout.f] * self.cfg.weight_bound


def main(argv=None):
    """Train logistic regression (HELR) on encrypted digits, 3 vs 8, beside the plaintext run.

    `python -m models.helr`: the encrypted weights are compared with the plaintext run's after
    every iteration, and both models' test accuracy at the end."""
    import argparse
    import time
    import warnings

    import fhetorch as fhe

    ap = argparse.ArgumentParser(prog="python -m models.helr", description=main.__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--iterations", type=int, default=None, help="NAG iterations (default: 8 on a GPU, 4 on a CPU)")
    ap.add_argument("--samples", type=int, default=None,
                    help="training samples used (default: all 250 on a GPU, 128 on a CPU)")
    args = ap.parse_args(argv)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    gpu = device.startswith("cuda")
    if not gpu:
        from models.cpus import limit_threads

        limit_threads()
    preset = "n16-bts40" if gpu else "toy-n13-bts"
    iterations = args.iterations or (8 if gpu else 4)
    if gpu:
        print(f"HELR on {device}: preset {preset} (128-bit secure)")
    else:
        print(f"HELR on the CPU: REDUCED INSECURE CONFIGURATION ({preset}, N = 2^13: a test preset, not secure)")
    xtr, ytr, xte, yte = load_digits_3v8()
    z = (xtr * ytr[:, None])[: args.samples or (len(ytr) if gpu else 128)]
    print(f"digits 3 vs 8: {z.shape[0]} training samples x {z.shape[1]} features, {len(yte)} test samples; "
          f"{iterations} iterations")
    print("keys (rotations, bootstrapping) ...", flush=True)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        ctx = fhe.Context(preset, device)
    EncryptedHELR.keygen(ctx, *z.shape)
    print(f"keys: {time.perf_counter() - t0:.1f} s, {ctx.key_bytes() / 2**30:.2f} GiB")
    cfg = HELRConfig(iterations=iterations)
    enc, plain = EncryptedHELR(ctx, z, cfg), PlainHELR(z, cfg, ctx.slots)
    for t in range(iterations):
        t0 = time.perf_counter()
        boots = enc.bootstraps
        enc.step()
        plain.step()
        if gpu:
            torch.cuda.synchronize()
        err = float((enc.weights() - plain.weights()).abs().max())
        note = " (weights bootstrapped)" if enc.bootstraps > boots else ""
        print(f"iteration {t + 1}: {time.perf_counter() - t0:.2f} s{note}, max |w_encrypted - w_plaintext| {err:.2e}",
              flush=True)
    print(f"test accuracy: encrypted training {accuracy(enc.weights(), xte, yte):.2%}, "
          f"plaintext {accuracy(plain.weights(), xte, yte):.2%}")


if __name__ == "__main__":
    main()

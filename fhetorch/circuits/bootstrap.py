"""CKKS bootstrapping: ModRaise, CoeffToSlot, EvalMod, SlotToCoeff.

A ciphertext at level 0 encrypts m (coefficients Delta * message) modulo Q_0. Bootstrapping
returns an encryption of the same message at level `user_levels` of a bootstrappable preset
(ckks/params.py BootstrapConfig):

1. ModRaise (Cheon et al. 2018): reading the level-0 residues as centred integers modulo a
   larger Q gives an encryption of t = m + Q_0 I, I an integer polynomial with |I| < K. With
   sparse-secret encapsulation (Bossuat et al. 2022) the ciphertext first switches to an
   ephemeral secret of Hamming weight h (a key living modulo Q_0 P' only), so
   |I| <= (h + 1) / 2 and in practice ~ sqrt(h / 12) * 6; after ModRaise it switches back.
2. SubSum (sparse packings of n < N/2 slots): sum over rotations by n, 2n, ... projects t onto
   the subring the n slots live in (times N / 2n, folded into the scale).
3. CoeffToSlot: the inverse slot DFT (circuits/dft.py) in `cts_levels` merged stages, so the
   slots hold w = (t_k + i t_(k+n)) / Q_0 = I + eps. Its first stage also divides by 2K.
   Conjugation splits real and imaginary parts: re = w' + conj(w'), im = i (conj(w') - w');
   for sparse packings (n <= N/4) the two parts sit side by side in 2n slots instead
   (`_wide_ends`), and EvalMod runs once.
4. EvalMod on each part (values x / K in [-1, 1]): a Chebyshev interpolant of
   cos(2 pi (x - 1/4) / 2^r), r double-angle steps (cos 2a = 2 cos^2 a - 1) give
   sin(2 pi x) = sin(2 pi eps) ~ 2 pi eps (Han-Ki 2020); optionally arcsin / 2 pi by its
   degree-3 Taylor polynomial. Then w'' = re + i im.
5. SlotToCoeff: the slot DFT in `stc_levels` merged stages, its last stage times
   Q_0 / (2 pi Delta), so the slots hold the message again.

`bootstrap_pair(a, b)` bootstraps two real ciphertexts as one complex a + i b (Cheddar), and
splits the result by conjugation; SlotToCoeff then takes a scale twice as large (the 1/2 of
(z + conj z) / 2 is free as a scale label).

Everything after the client's keygen is deterministic and sync-free: the first call encodes
the DFT diagonals (cached per slot count, level and scale) and later calls can be captured
in a CUDA graph (benchmarks/bts.py).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..ckks import evaluator as ev
from ..ckks.ciphertext import Ciphertext
from ..errors import MissingKeyError, ParameterError
from ..rlwe import key_switch
from . import dft
from .chebyshev import interpolate
from .linear import LinearTransform, rotation_steps
from .polynomial import evaluate

def config(ctx):
    return config_of(ctx.params)


def config_of(params):
    cfg = params.bootstrap
    if cfg is None:
        raise ParameterError(f"bootstrap: parameters {params.name!r} are not bootstrappable; use a preset made for "
                             "it (n16-bts40, n16-bts35, or toy-n13-bts for tests)")
    return cfg


def bootstrapper(ctx) -> "Bootstrapper":
    """The context's Bootstrapper (one per context object: it caches encoded DFT diagonals)."""
    b = ctx.circuit_cache.get("bootstrapper")
    if b is None:
        b = ctx.circuit_cache["bootstrapper"] = Bootstrapper(ctx)
    return b


def _pad_groups(groups: list, levels: int, n: int) -> list:
    """Exactly `levels` groups (identity stages fill a short DFT), so the level plan is the same
    for every slot count."""
    ident = {0: torch.ones(n, dtype=torch.complex128)}
    return groups + [dict(ident) for _ in range(levels - len(groups))]


class Bootstrapper:
    """Bootstrapping for one CKKSContext of a bootstrappable preset."""

    def __init__(self, ctx):
        self.cfg = cfg = config(ctx)
        self.ctx = ctx
        K, r = cfg.k_range, cfg.double_angles
        self.cos = interpolate(lambda y: np.cos(2 * np.pi * (K * np.asarray(y) - 0.25) / 2**r), (-1.0, 1.0), cfg.cos_degree)
        self.arcsine = interpolate(lambda y: (np.asarray(y) + np.asarray(y) ** 3 / 6) / (2 * np.pi), (-1.0, 1.0), 3) if cfg.arcsine else None
        self.q0 = ctx.basis(0).product
        self._dfts: dict = {}

    # --- plan ---------------------------------------------------------------------------
    def transforms(self, slots: int):
        """(CoeffToSlot transforms, SlotToCoeff transforms) for `slots` slots, built once."""
        t = self._dfts.get(slots)
        if t is None:
            ctx, cfg = self.ctx, self.cfg
            cts = _pad_groups(dft.coeff_to_slot_groups(slots, cfg.cts_levels), cfg.cts_levels, slots)
            stc = _pad_groups(dft.slot_to_coeff_groups(slots, cfg.stc_levels), cfg.stc_levels, slots)
            # Constants go where they keep values large against each level's noise: 1 / 2K at the
            # end of CoeffToSlot, Q_0 / (2 pi Delta') (~2^5) at the end of SlotToCoeff.
            cts[-1] = {k: d / (2 * cfg.k_range) for k, d in cts[-1].items()}
            out = self.q0 / (ctx.nominal_scale(0) * self.input_factor(slots))
            out /= 1.0 if cfg.arcsine else 2 * math.pi
            stc[-1] = {k: d * out for k, d in stc[-1].items()}
            sizes = [slots] * len(cts), [slots] * len(stc)
            if 2 * slots <= ctx.slots:  # sparse: one EvalMod on 2n slots (see _wide_ends)
                cts[-1], stc[0] = _wide_ends(cts[-1], stc[0], slots)
                sizes = [slots] * (len(cts) - 1) + [2 * slots], [2 * slots] + [slots] * (len(stc) - 1)
            t = ([LinearTransform.from_diagonals(ctx, g, m) for g, m in zip(cts, sizes[0])],
                 [LinearTransform.from_diagonals(ctx, g, m) for g, m in zip(stc, sizes[1])])
            self._dfts[slots] = t
        return t

    def input_factor(self, slots: int) -> int:
        """The integer the level-0 input is multiplied by so that Q_0 / (Delta * it) is the
        message ratio: smaller ratios magnify EvalMod's errors less, larger ones keep
        eps = m / Q_0 in sin's linear range (sparse packings have larger coefficients)."""
        cfg, ctx = self.cfg, self.ctx
        ratio_bits = cfg.message_ratio + max(0, math.ceil((15 - math.log2(slots)) / 2))
        return max(1, int(self.q0 / ctx.nominal_scale(0) / 2**ratio_bits))

    def rotations(self, slots: int) -> dict:
        """{rotation step: highest level it is used at} for bootstrapping `slots` slots."""
        return rotation_levels(self.ctx.params, slots)

    # --- the algorithm --------------------------------------------------------------------
    def _prepare(self, ct: Ciphertext) -> Ciphertext:
        ctx = self.ctx
        ct = ev.relinearize(ctx, ct)
        if ct.level > 0:
            ct = ev.drop_level(ctx, ct, ct.level)  # lands on level 0's nominal scale
        return ct

    def _scale_up(self, ct: Ciphertext) -> Ciphertext:
        k = self.input_factor(ct.slots)
        return ev.mul_scalar(self.ctx, ct, k) if k > 1 else ct

    def mod_raise(self, ct: Ciphertext) -> Ciphertext:
        """Level-0 ciphertext -> the top level, encrypting m + Q_0 I, scale label Q_0 (values I + eps)."""
        ctx, cfg = self.ctx, self.cfg
        lvl0 = ctx.level_idx(0)
        c = ct.data
        enc = ctx.encapsulation_keys
        if cfg.ephemeral_weight:
            if enc is None or enc.weight != cfg.ephemeral_weight:
                raise MissingKeyError("bootstrap: no sparse-secret encapsulation keys; generate the bootstrapping "
                                      "keys with ctx.keygen(bootstrap=True) on the client")
            c = key_switch(ctx.ring, c[1], enc.to_sparse, lvl0, enc.special, lvl0.stop, addend=c[0])
        b0 = ctx.basis(0)
        digits = ctx.ring.crt_digits(c, b0).to(torch.int64)  # centred mixed radix, Q_0 < 2^62
        x = digits[..., 0, :]
        for k, w in enumerate(b0.radix_weights[1:], start=1):
            x = x + digits[..., k, :] * w
        top = cfg.top
        data = ctx.ring.from_integers(x.contiguous(), ctx.basis(top))
        if cfg.ephemeral_weight:
            data = key_switch(ctx.ring, data[1], enc.to_dense, ctx.level_idx(top), ctx.special_idx, ctx.params.alpha,
                              addend=data[0])
        return Ciphertext(data, top, float(self.q0), ctx.slots)

    def _sub_sum(self, ct: Ciphertext, slots: int) -> Ciphertext:
        ctx = self.ctx
        step = slots
        while step < ctx.slots:
            ct = ev.add(ctx, ct, ev.rotate(ctx, ct, step))
            step *= 2
        return ct.replace(slots=slots, scale=ct.scale * (ctx.slots // slots))

    def coeff_to_slot(self, ct: Ciphertext) -> tuple:
        """(re, im): the ModRaised coefficients / (K Q_0) as real slot vectors; for a sparse
        packing of n <= N/4 slots, (v,): one real vector of 2n slots [re, im] (_wide_ends)."""
        n = ct.slots
        for lt in self.transforms(n)[0]:
            ct = lt(ct.replace(slots=lt.n))  # an n-slot ciphertext is also a replicated 2n-slot one
        if ct.slots == n:
            return self._split(ct)
        return (ev.add(self.ctx, ct, ev.conjugate(self.ctx, ct)),)

    def _split(self, ct: Ciphertext) -> tuple:
        """(2 Re, 2 Im) of the slots: ct + conj(ct) and i (conj(ct) - ct); no level used."""
        ctx = self.ctx
        conj = ev.conjugate(ctx, ct)
        return ev.add(ctx, ct, conj), ev.mul_i(ctx, ev.sub(ctx, conj, ct))

    def eval_mod(self, y: Ciphertext) -> Ciphertext:
        """sin(2 pi K y) (or arcsin of it / 2 pi) for slot values y in [-1, 1]."""
        ctx = self.ctx
        p = evaluate(ctx, y, self.cos)
        for _ in range(self.cfg.double_angles):
            p = ev.add_scalar(ctx, ev.mul_scalar(ctx, ev.multiply(ctx, p, p), 2), -1.0)
        if self.arcsine is not None:
            p = evaluate(ctx, p, self.arcsine)
        return p

    def slot_to_coeff(self, ct: Ciphertext, slots: int) -> Ciphertext:
        for lt in self.transforms(slots)[1]:
            ct = lt(ct)
            ct = ct.replace(slots=min(ct.slots, slots))  # the wide first stage writes n slots, replicated
        return ct

    def _refresh(self, ct: Ciphertext, halve: bool) -> Ciphertext:
        ctx = self.ctx
        ct = self._prepare(ct)
        delta_in = ct.scale
        slots = ct.slots
        x = self.mod_raise(self._scale_up(ct))
        if slots < ctx.slots:
            x = self._sub_sum(x, slots)
        parts = self.coeff_to_slot(x)
        if len(parts) == 2:
            w = ev.add(ctx, self.eval_mod(parts[0]), ev.mul_i(ctx, self.eval_mod(parts[1])))
        else:  # [re, im] in 2n slots: SlotToCoeff's first stage forms re + i im
            w = self.eval_mod(parts[0])
        # SlotToCoeff's constant assumes the nominal level-0 scale; another input scale, and the
        # pair's 1/2, are scale labels
        w = w.replace(scale=w.scale * (delta_in / ctx.nominal_scale(0)) * (2.0 if halve else 1.0))
        out = self.slot_to_coeff(w, slots)
        assert out.level == self.cfg.user_levels, (out.level, self.cfg.user_levels)
        return out

    def bootstrap(self, ct: Ciphertext) -> Ciphertext:
        """A fresh encryption of ct's message at level cfg.user_levels."""
        return self._refresh(ct, halve=False)

    def bootstrap_pair(self, a: Ciphertext, b: Ciphertext) -> tuple:
        """Two real-valued ciphertexts refreshed by one bootstrapping of a + i b."""
        ctx = self.ctx
        if a.slots != b.slots:
            raise ValueError(f"bootstrap_pair: the ciphertexts pack {a.slots} and {b.slots} slots; use one layout")
        a, b = self._prepare(a), self._prepare(b)
        c = ev.add(ctx, a, ev.mul_i(ctx, b))
        out = self._refresh(c, halve=True)
        return self._split(out)


def rotation_levels(params, slots: int) -> dict:
    """{rotation step: highest level it is used at} for bootstrapping `slots` slots under
    `params` (no context needed: the plan report estimates key memory from it)."""
    cfg, full = config_of(params), params.n // 2
    cts = _pad_groups(dft.coeff_to_slot_groups(slots, cfg.cts_levels), cfg.cts_levels, slots)
    stc = _pad_groups(dft.slot_to_coeff_groups(slots, cfg.stc_levels), cfg.stc_levels, slots)
    sizes = [slots] * len(cts), [slots] * len(stc)
    if 2 * slots <= full:
        cts[-1], stc[0] = _wide_ends(cts[-1], stc[0], slots)
        sizes = [slots] * (len(cts) - 1) + [2 * slots], [2 * slots] + [slots] * (len(stc) - 1)
    out = {}
    step = slots
    while step < full:  # SubSum, at the top
        out[step] = cfg.top
        step *= 2
    for first, groups, ns in ((cfg.top, cts, sizes[0]), (cfg.stc_input_level, stc, sizes[1])):
        for i, (g, n) in enumerate(zip(groups, ns)):
            for s in rotation_steps(g, n):
                out[s] = max(out.get(s, 0), first - i)
    return out


def _wide_ends(cts_last: dict, stc_first: dict, n: int) -> tuple:
    """CoeffToSlot's last and SlotToCoeff's first stage for a sparse packing of n <= N/4 slots,
    as transforms of 2n slots, so that EvalMod runs once instead of on the real and the
    imaginary part separately (Bossuat et al. 2021, sparse packings). The n-slot ciphertext
    is also a 2n-slot one holding [x, x]:
    - CoeffToSlot ends with y = [w, -i w]; then y + conj(y) = [2 Re w, 2 Im w] (real);
    - SlotToCoeff starts from EvalMod's [a, b] with u = a + i b in both halves: [a, b] ->
      [a + i b, a + i b] is diagonals {0: [1, i], n: [i, 1]}, then its first n-slot stage.
    Same levels; the first SlotToCoeff stage has up to twice the diagonals."""
    one, j = torch.ones(n, dtype=torch.complex128), 1j * torch.ones(n, dtype=torch.complex128)
    lift = lambda g: {k: torch.cat([d, d]) for k, d in g.items()}  # noqa: E731 (the same stage on [x, x])
    cts = dft.compose({0: torch.cat([one, -j])}, lift(cts_last), 2 * n)
    stc = dft.compose(lift(stc_first), {0: torch.cat([one, j]), n: torch.cat([j, one])}, 2 * n)
    return cts, stc


def _unwrap(x):
    return getattr(x, "ciphertext", x), getattr(x, "ctx", None)


def bootstrap(x, ctx=None):
    """Refreshed copy of a Ciphertext (give its ctx) or an EncryptedTensor, at level
    `user_levels` of a bootstrappable preset. Keys: ctx.keygen(bootstrap=True)."""
    ct, own = _unwrap(x)
    ctx = ctx or own
    if ctx is None:
        raise ValueError("bootstrap: give the context of a bare Ciphertext: bootstrap(ct, ctx)")
    out = bootstrapper(ctx).bootstrap(ct)
    return x._like(out) if hasattr(x, "_like") else out


def bootstrap_pair(x, y, ctx=None):
    """Two real-valued ciphertexts / EncryptedTensors bootstrapped together (as x + i y)."""
    (a, own), (b, _) = _unwrap(x), _unwrap(y)
    ctx = ctx or own
    if ctx is None:
        raise ValueError("bootstrap_pair: give the context of bare Ciphertexts: bootstrap_pair(a, b, ctx)")
    u, v = bootstrapper(ctx).bootstrap_pair(a, b)
    return (x._like(u) if hasattr(x, "_like") else u), (y._like(v) if hasattr(y, "_like") else v)


def rotations(ctx, slots=None) -> dict:
    """{step: highest level used} of the rotation keys bootstrapping `slots` (default: all) needs."""
    return bootstrapper(ctx).rotations(ctx.slots if slots is None else slots)

"""CKKS bootstrapping: ModRaise, CoeffToSlot, EvalMod, SlotToCoeff.

A ciphertext at level 0 encrypts m (coefficients Delta * message) modulo Q_0. Bootstrapping
returns an encryption of the same message at level `user_levels` of a bootstrappable chain
(circuits/bootstrap_config.py BootstrapConfig):

1. ModRaise (Cheon et al. 2018): reading the level-0 residues as centred integers modulo a
   larger Q gives an encryption of t = m + Q_0 I, I an integer polynomial with |I| < K. With
   sparse-secret encapsulation (Bossuat et al. 2022) the ciphertext first switches to an
   ephemeral secret of Hamming weight h (a key living modulo Q_0 P' only), so
   |I| <= (h + 1) / 2 and in practice ~ sqrt(h / 12) * 6; after ModRaise it switches back.
2. SubSum (sparse packings of n < N/2 slots): sum over rotations by n, 2n, ... projects t onto
   the subring the n slots live in (times N / 2n, folded into the scale). A packing whose own
   circuit has no keys runs that of the smallest larger packing m with keys (`packing`: an
   n-slot ciphertext is an m-slot one holding its values m / n times), read back as n slots.
3. CoeffToSlot: the inverse slot DFT (circuits/dft.py) in `cts_levels` merged stages, so the
   slots hold w = (t_k + i t_(k+n)) / Q_0 = I + eps. Its last stage also divides by 2 K s.
   Conjugation splits real and imaginary parts: re = w' + conj(w'), im = i (conj(w') - w');
   for sparse packings (n <= N/4) the two parts sit side by side in 2n slots instead
   (`_wide_ends`), and EvalMod runs once.
4. EvalMod on each part (values y = x / (K s), s = 1 + 1 / 4K): cos(2 pi (x - 1/4) / 2^r),
   an even function of t = y - 1 / (4 K s) in [-1, 1], as a Chebyshev interpolant in
   T_2(t) = 2 t^2 - 1 of half the degree; r double-angle steps (cos 2a = 2 cos^2 a - 1) give
   sin(2 pi x) = sin(2 pi eps) ~ 2 pi eps (Han-Ki 2020); optionally arcsin / 2 pi by its
   degree-3 Taylor polynomial. Then w'' = re + i im.
5. SlotToCoeff: the slot DFT in `stc_levels` merged stages, its last stage times
   Q_0 / (2 pi Delta), so the slots hold the message again.

`bootstrap_pair(a, b)` bootstraps two real ciphertexts as one complex a + i b (Cheddar), and
splits the result by conjugation; SlotToCoeff then takes a scale twice as large (the 1/2 of
(z + conj z) / 2 is free as a scale label). "Real" holds only up to noise, and a polynomial
magnifies the noise's imaginary part by its slope (a composite sign near a tie: ~2^12), which
a + i b would carry into b. So the pair is formed from the real parts,
Re a + i Re b = (a + i b + conj(a - i b)) / 2: one conjugation at the inputs' level.

A `Bootstrapper` holds one context's bootstrapping state (the EvalMod interpolants, the DFTs'
encoded diagonals per slot count, level and scale); the user-facing Context owns one
(`ctx.bootstrapper`). Everything after the client's keygen is deterministic and sync-free:
the first call encodes the DFT diagonals and later calls can be captured in a CUDA graph
(benchmarks/bts.py).
"""
from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import torch

from .. import _ops
from .._ckks import evaluator as ev
from .._ckks.ciphertext import Ciphertext
from .._ckks.context import galois_element
from ..errors import MissingKeyError, ParameterError, SlotError
from .._rlwe import switching_key_bytes
from .._rlwe.keyswitch import keyswitch
from . import dft
from .bootstrap_config import BootstrapConfig
from .chebyshev import interpolate
from .linear import MAC_BABIES, LinearTransform, bsgs_steps, rotation_steps
from .polynomial import evaluate
from .polynomial.ops import CiphertextOps


def cosine_series(cfg: BootstrapConfig) -> tuple:
    """(q, s): EvalMod's cosine as a series in T_2(t). cos(2 pi (x - 1/4) / 2^r) is even about
    x = 1/4: with y = x / (K s) and t = y - 1 / (4 K s) in [-1, 1] (s = 1 + 1 / 4K widens the
    interval so that it is symmetric about t = 0) it is cos(a t), a = 2 pi K s / 2^r, which is
    q(T_2(t)) with q(u) = cos(a sqrt((u + 1) / 2)) of half the degree: one squaring, then a
    series of degree cos_degree / 2 (9 multiplications at degree 54 against 15 for a generic
    series of degree 63; the same levels and error). Raises nothing."""
    K, r = cfg.k_range, cfg.double_angles
    s = 1.0 + 1.0 / (4 * K)
    a = 2 * np.pi * K * s / 2**r
    return interpolate(lambda u: np.cos(a * np.sqrt((np.asarray(u) + 1.0) / 2.0)), (-1.0, 1.0), cfg.cos_degree // 2), s


def _pad_groups(groups: list, levels: int, n: int) -> list:
    """Exactly `levels` groups (identity stages fill a short DFT), so the level plan is the same
    for every slot count."""
    ident = {0: torch.ones(n, dtype=torch.complex128)}
    return groups + [dict(ident) for _ in range(levels - len(groups))]


class Bootstrapper:
    """Bootstrapping for one CKKSContext whose parameters have `config`'s levels (ParameterError
    otherwise); it keeps the DFTs' encoded diagonals for the life of the context."""

    def __init__(self, ctx, config: BootstrapConfig):
        config.check(ctx.params)
        self.cfg = cfg = config
        self.ctx = ctx
        self.cos, self.widen = cosine_series(cfg)
        self.arcsine = interpolate(lambda y: (np.asarray(y) + np.asarray(y) ** 3 / 6) / (2 * np.pi), (-1.0, 1.0), 3) if cfg.arcsine else None
        self.q0 = ctx.basis(0).product
        self._dfts: dict = {}  # ("cts", slots) and ("stc", slots, factor): lists of LinearTransforms
        self._rotations: dict = {}

    # --- plan ---------------------------------------------------------------------------
    def transforms(self, slots: int, factor: float | None = None):
        """(CoeffToSlot transforms, SlotToCoeff transforms) for `slots` slots, built once; the
        input `factor` (input_factor; default: that of `slots` at level 0) only enters
        SlotToCoeff's last stage."""
        return self.cts_transforms(slots), self.stc_transforms(slots, factor)

    def cts_transforms(self, slots: int) -> list:
        lts = self._dfts.get(("cts", slots))
        if lts is None:
            cts, _ = _dft_stages(self.ctx.params, self.cfg, slots)
            n1s, _ = dft_baby_steps(self.ctx.params, self.cfg, slots)
            # Constants go where they keep values large against each level's noise: 1 / 2Ks at the
            # end of CoeffToSlot (cosine_series), Q_0 / (2 pi Delta') (~2^5) at the end of SlotToCoeff.
            cts[-1] = ({k: d / (2 * self.cfg.k_range * self.widen) for k, d in cts[-1][0].items()}, cts[-1][1])
            lts = self._dfts[("cts", slots)] = [LinearTransform.from_diagonals(self.ctx, g, m, n1=n1, centered=c)
                                                for (g, m), (n1, c) in zip(cts, n1s)]
        return lts

    def stc_transforms(self, slots: int, factor: float | None = None) -> list:
        factor = self.input_factor(slots) if factor is None else factor
        lts = self._dfts.get(("stc", slots, factor))
        if lts is None:
            _, stc = _dft_stages(self.ctx.params, self.cfg, slots)
            _, n1s = dft_baby_steps(self.ctx.params, self.cfg, slots)
            out = self.q0 / (self.ctx.nominal_scale(0) * factor) / (1.0 if self.cfg.arcsine else 2 * math.pi)
            n1, c = n1s[-1]
            last = LinearTransform.from_diagonals(self.ctx, {k: d * out for k, d in stc[-1][0].items()}, stc[-1][1],
                                                  n1=n1, centered=c)
            # the stages before the last do not depend on the factor: shared between factors
            other = next((v for k, v in self._dfts.items() if k[:2] == ("stc", slots)), None)
            first = other[:-1] if other else [LinearTransform.from_diagonals(self.ctx, g, m, n1=n1, centered=c)
                                              for (g, m), (n1, c) in zip(stc[:-1], n1s)]
            lts = self._dfts[("stc", slots, factor)] = first + [last]
        return lts

    @property
    def tensors(self) -> list:
        """The tensors this bootstrapper keeps (its DFTs' diagonals; for memory reports)."""
        lts = {id(lt): lt for lts in self._dfts.values() for lt in lts}
        return [t for lt in lts.values() for t in lt.tensors]

    def packing(self, slots: int) -> int:
        """The packing a `slots`-slot ciphertext bootstraps in: `slots` itself when the keys of
        its circuit are there, else the smallest larger power of two whose keys are (an n-slot
        ciphertext is also an m-slot one holding its values m / n times; the result is read back
        as n slots). keygen(bootstrap=True) makes the full packing's keys, so every size
        bootstraps; bootstrap_slots=[n] adds n's own, faster circuit."""
        m = slots
        while m <= self.ctx.slots:
            if self.has_keys(m):
                return m
            m *= 2
        raise MissingKeyError(f"bootstrap: no rotation keys for bootstrapping {slots} slots (nor a larger packing); "
                              f"generate them with ctx.keygen(bootstrap=True) (every size, through the full packing) "
                              f"or ctx.keygen(bootstrap=True, bootstrap_slots=[{slots}]) (this size's faster "
                              "circuit) on the client")

    def has_keys(self, slots: int) -> bool:
        """Whether the context holds every rotation key (at its levels) of bootstrapping `slots` slots."""
        ctx = self.ctx
        if not ctx.has_galois_key(2 * ctx.n - 1, self.cfg.top):  # conjugation
            return False
        return all(ctx.has_galois_key(galois_element(s, ctx.n), lvl) for s, lvl in self.rotations(slots).items())

    def input_factor(self, slots: int, level: int = 0, ratio: int | None = None) -> float:
        """What the input's message is multiplied by before ModRaise so that Q_0 / (Delta_0 * it)
        is the message ratio: smaller ratios magnify EvalMod's errors less, larger ones keep
        eps = m / Q_0 in sin's linear range, where sin(2 pi eps) / 2 pi falls short of eps by
        (2 pi eps)^2 / 6 of it (sparse packings have larger coefficients: a 1-slot packing's
        coefficient is its value). At level 0 an integer >= 1 (an exact multiplication); from
        a higher level also a fraction, which the drop to level 0 applies at no cost: presets
        whose Q_0 / Delta_0 (2^10 at toy-n13-bts and n16-bts40) is below the ratio a small
        packing wants reach it only so (docs/circuits.md, "Precision of small packings").
        `ratio` overrides cfg.message_ratio: the default suits inputs whose message spreads over
        many coefficients (random-like values); inputs with most of it in a few coefficients
        (constants, alternating or block patterns) lose bits to the sine's cubic term unless the
        ratio is larger (docs/circuits.md, "Precision of structured inputs")."""
        ratio_bits = (self.cfg.message_ratio if ratio is None else int(ratio)) + max(0, math.ceil((15 - math.log2(slots)) / 2))
        ideal = self.q0 / self.ctx.nominal_scale(0) / 2**ratio_bits
        if ratio is not None:  # only ever a smaller integer: a fraction below the default's would
            return min(max(1, int(ideal)), self.input_factor(slots, level))  # overflow SlotToCoeff's constant
        return ideal if ideal < 1 and level > 0 else max(1, int(ideal))

    def rotations(self, slots: int) -> dict:
        """{rotation step: highest level it is used at} for bootstrapping `slots` slots."""
        r = self._rotations.get(slots)
        if r is None:
            r = self._rotations[slots] = rotation_levels(self.ctx.params, self.cfg, slots)
        return r

    # --- the algorithm --------------------------------------------------------------------
    def _prepare(self, ct: Ciphertext, factor: float = 1) -> Ciphertext:
        """ct relinearised at level 0, on level 0's nominal scale when it comes from above; its
        values times `factor` if that is a fraction (the last drop multiplies by it, no level
        used; integers multiply in _scale_up)."""
        ctx = self.ctx
        ct = ev.relinearize(ctx, ct)
        if ct.level > 0 and factor < 1:
            ct = ev.drop_level(ctx, ct, ct.level - 1)
            k = round(ev._target_scale_factor(ctx, ct) * factor)  # ~2^20 or more: relative rounding tiny
            b = ctx.basis(ct.level)
            ct = ev.rescale(ctx, ct.replace(data=_ops.mul_const(ct.data, b.scalar(k), b.mod), scale=ct.scale * k))
            ct = ct.replace(scale=ct.scale / factor)  # ~Delta_0: the message is factor * values
        elif ct.level > 0:
            ct = ev.drop_level(ctx, ct, ct.level)  # lands on level 0's nominal scale
        return ct

    def _scale_up(self, ct: Ciphertext, factor: float | None = None) -> Ciphertext:
        k = self.input_factor(ct.slots) if factor is None else factor
        return ev.mul_scalar(self.ctx, ct, k) if k > 1 else ct

    def mod_raise(self, ct: Ciphertext) -> Ciphertext:
        """Level-0 ciphertext -> the top level, encrypting m + Q_0 I, scale label Q_0 (values I + eps)."""
        ctx, cfg = self.ctx, self.cfg
        lvl0 = ctx.params.limbs(0)
        c = ct.data
        enc = ctx.encapsulation_keys
        if cfg.ephemeral_weight:
            if enc is None or enc.weight != cfg.ephemeral_weight:
                raise MissingKeyError("bootstrap: no sparse-secret encapsulation keys; generate the bootstrapping "
                                      "keys with ctx.keygen(bootstrap=True) on the client")
            c = keyswitch(ctx.modulus_tables, c.select(-3, 1), enc.to_sparse, lvl0, enc.special, lvl0.stop,
                          addend=c.select(-3, 0))
        b0 = ctx.basis(0)
        x = ctx.ring.to_int64(c, b0)  # Q_0 < 2^62
        top = cfg.top
        data = ctx.ring.from_integers(x.contiguous(), ctx.basis(top))
        if cfg.ephemeral_weight:
            data = keyswitch(ctx.modulus_tables, data.select(-3, 1), enc.to_dense, ctx.params.limbs(top),
                             ctx.params.special_limbs, ctx.params.alpha, addend=data.select(-3, 0))
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
        for lt in self.cts_transforms(n):
            ct = lt(ct.replace(slots=lt.n))  # an n-slot ciphertext is also a replicated 2n-slot one
        if ct.slots == n:
            return self._split(ct)
        return (ev.add(self.ctx, ct, ev.conj(self.ctx, ct)),)

    def _split(self, ct: Ciphertext) -> tuple:
        """(2 Re, 2 Im) of the slots: ct + conj(ct) and i (conj(ct) - ct); no level used."""
        ctx = self.ctx
        conj = ev.conj(ctx, ct)
        return ev.add(ctx, ct, conj), ev.mul_i(ctx, ev.sub(ctx, conj, ct))

    def cosine(self, y: Ciphertext) -> Ciphertext:
        """cos(2 pi (x - 1/4) / 2^r) for slot values y = x / (K s) in [-1 / s, 1 / s] (cosine_series):
        t = y - 1 / (4 K s) (no level), T_2(t) = 2 t^2 - 1 (one level), then the even series."""
        ctx, ops = self.ctx, CiphertextOps(self.ctx)
        t = ops.add_const(y, -1.0 / (4 * self.cfg.k_range * self.widen))
        sq = ev.mul(ctx, t, t)
        if ops.nominal(sq):
            # evaluate() takes its input's scale as nominal (PowerBasis); the product's label is off
            # nominal by float rounding (~1e-15), which relabelled here scales t^2 only: relabelled
            # after the - 1, it would shift u ~ -1 (x near 0) by itself, and q'(u) ~ a^2 / 4 ~ 160
            # there makes that a bias, which SlotToCoeff's DFT gathers into a few slots (-1 bit)
            sq = sq.replace(scale=ctx.nominal_scale(sq.level))
        u = ops.lincomb([(2, sq)], -1.0)
        return evaluate(ctx, u, self.cos)

    def eval_mod(self, y: Ciphertext) -> Ciphertext:
        """sin(2 pi x) (or arcsin of it / 2 pi) for slot values y = x / (K s) (cosine_series)."""
        ctx = self.ctx
        p = self.cosine(y)
        ops = CiphertextOps(ctx)
        for _ in range(self.cfg.double_angles):  # 2 p^2 - 1: the square, then one pass
            p = ops.lincomb([(2, ev.mul(ctx, p, p))], -1.0)
        if self.arcsine is not None:
            p = evaluate(ctx, p, self.arcsine)
        return p

    def eval_mod_parts(self, re: Ciphertext, im: Ciphertext) -> Ciphertext:
        """eval_mod(re) + i eval_mod(im), both parts stacked into one batch: every kernel of
        EvalMod then runs once over both (half the launches, twice the rows per launch)."""
        ctx = self.ctx
        w = self.eval_mod(re.replace(data=torch.stack([re.data, im.data])))
        return ev.add(ctx, w.replace(data=w.data[0]), ev.mul_i(ctx, w.replace(data=w.data[1])))

    def slot_to_coeff(self, ct: Ciphertext, slots: int, factor: float | None = None) -> Ciphertext:
        for lt in self.stc_transforms(slots, factor):
            ct = lt(ct)
            ct = ct.replace(slots=min(ct.slots, slots))  # the wide first stage writes n slots, replicated
        return ct

    def _refresh(self, ct: Ciphertext, halve: bool, ratio: int | None = None) -> Ciphertext:
        ctx = self.ctx
        slots = ct.slots
        packing = self.packing(slots)  # slots, or a larger packing with keys (the values repeated)
        # the data's own slot count; a fraction only in its own circuit: a larger packing's
        # noise, magnified by the message ratio, outweighs the sine's cubic term it would save
        factor = self.input_factor(slots, ct.level if packing == slots else 0, ratio)
        ct = self._prepare(ct, factor)
        # SlotToCoeff's constant assumes level 0's nominal scale; another input scale (a level-0
        # input off it, the rounding of a fractional factor), and the pair's 1/2, are scale labels
        label = ct.scale / ctx.nominal_scale(0) * (2.0 if halve else 1.0)
        x = self.mod_raise(self._scale_up(ct, factor))
        if packing < ctx.slots:
            x = self._sub_sum(x, packing)
        parts = self.coeff_to_slot(x)
        if len(parts) == 2:
            w = self.eval_mod_parts(*parts)
        else:  # [re, im] in 2n slots: SlotToCoeff's first stage forms re + i im
            w = self.eval_mod(parts[0])
        out = self.slot_to_coeff(w.replace(scale=w.scale * label), packing, factor)
        assert out.level == self.cfg.user_levels, (out.level, self.cfg.user_levels)
        return out.replace(slots=slots)

    def bootstrap(self, ct: Ciphertext, *, ratio: int | None = None, real: bool = False) -> Ciphertext:
        """A fresh encryption of ct's message at level cfg.user_levels (`ratio`: input_factor).
        real=True returns the real part only (one conjugation more): the output's noise has an
        imaginary part as large as its real one, which a steep polynomial applied next would
        magnify into the real part (the sort's composite sign, docs/circuits.md)."""
        if not real:
            return self._refresh(ct, halve=False, ratio=ratio)
        out = self._refresh(ct, halve=True, ratio=ratio)  # the values / 2
        return ev.add(self.ctx, out, ev.conj(self.ctx, out))

    def bootstrap_pair(self, a: Ciphertext, b: Ciphertext, *, ratio: int | None = None) -> tuple:
        """Two real-valued ciphertexts refreshed by one bootstrapping of Re a + i Re b (`ratio`:
        input_factor)."""
        ctx = self.ctx
        if a.slots != b.slots:
            raise SlotError(f"bootstrap_pair: the ciphertexts pack {a.slots} and {b.slots} slots; use one layout")
        a, ib = ev.relinearize(ctx, a), ev.mul_i(ctx, ev.relinearize(ctx, b))
        c = ev.add(ctx, ev.add(ctx, a, ib), ev.conj(ctx, ev.sub(ctx, a, ib)))  # 2 (Re a + i Re b), see above
        out = self._refresh(c.replace(scale=c.scale * 2), halve=True, ratio=ratio)
        return self._split(out)


def _dft_stages(params, cfg: BootstrapConfig, slots: int) -> tuple:
    """(CoeffToSlot stages, SlotToCoeff stages) of bootstrapping `slots` slots, each a list of
    ({offset: diagonal}, slots it acts on), without the constants Bootstrapper folds in."""
    full = params.n // 2
    cts = _pad_groups(dft.coeff_to_slot_groups(slots, cfg.cts_levels), cfg.cts_levels, slots)
    stc = _pad_groups(dft.slot_to_coeff_groups(slots, cfg.stc_levels), cfg.stc_levels, slots)
    sizes = [slots] * len(cts), [slots] * len(stc)
    if 2 * slots <= full:  # sparse: one EvalMod on 2n slots (see _wide_ends)
        cts[-1], stc[0] = _wide_ends(cts[-1], stc[0], slots)
        sizes = [slots] * (len(cts) - 1) + [2 * slots], [2 * slots] + [slots] * (len(stc) - 1)
    return list(zip(cts, sizes[0])), list(zip(stc, sizes[1]))


def rotation_levels(params, cfg: BootstrapConfig, slots: int) -> dict:
    """{rotation step: highest level it is used at} for bootstrapping `slots` slots under
    `params` and `cfg` (no context needed: the plan report estimates key memory from it)."""
    full = params.n // 2
    out = {}
    step = slots
    while step < full:  # SubSum, at the top
        out[step] = cfg.top
        step *= 2
    for (ks, n, level), (n1, c) in zip(_stage_offsets(params, cfg, slots), sum(dft_baby_steps(params, cfg, slots), ())):
        for s in rotation_steps(ks, n, n1, c):
            out[s] = max(out.get(s, 0), level)
    return out


@functools.lru_cache(maxsize=64)
def _stage_offsets(params, cfg: BootstrapConfig, slots: int) -> tuple:
    """((diagonal offsets, slots, level it runs at), ...) of every DFT stage, CoeffToSlot's then
    SlotToCoeff's (forming the stages takes seconds at 2^15 slots: kept)."""
    cts, stc = _dft_stages(params, cfg, slots)
    return tuple([(tuple(sorted(g)), n, cfg.top - i) for i, (g, n) in enumerate(cts)]
                 + [(tuple(sorted(g)), n, cfg.stc_input_level - i) for i, (g, n) in enumerate(stc)])


# Relative time of one baby and one giant rotation of a fused DFT stage, per limb: a baby step
# reads one more key in hoisted_mac (~105 us at n16-bts40's top level on the H100), a giant
# step is a whole key switch (ModDown, ModUp, key product; ~375 us)
BABY_WEIGHT, GIANT_WEIGHT = 1.0, 3.5


@functools.lru_cache(maxsize=64)
def dft_baby_steps(params, cfg: BootstrapConfig, slots: int) -> tuple:
    """(CoeffToSlot's, SlotToCoeff's) baby steps, one (n1, centered) per stage (see
    LinearTransform.from_diagonals), for bootstrapping `slots` slots.

    Each stage may take any baby-step size, plain or centered, within two rotations of its
    fewest (and at most one hoisted_mac call's babies). The plan is the fastest by the model
    sum(limbs x (BABY_WEIGHT babies + GIANT_WEIGHT giants)) whose key bytes stay within those
    of the reference plan, each stage's fewest rotations with the smallest plain n1 (keys
    beyond the +-2^i ones every keygen makes; a step shared by stages holds one key, over the
    limbs of its highest level; CoeffToSlot's at the top, as key_levels makes them):
    CoeffToSlot's stages over every combination first (with the reference SlotToCoeff), then
    SlotToCoeff's. Fewest rotations alone picks many giants, each a whole key switch; other
    splits trade giants for babies, which only read their keys."""
    special, alpha, top, full = len(params.special_primes), params.alpha, params.max_level, params.n // 2
    free = {s for i in range(full.bit_length() - 1) for s in (1 << i, full - (1 << i))}
    options = []  # per stage: [((n1, centered), {step: key level}, modelled time)]
    for ks, n, level in _stage_offsets(params, cfg, slots):
        key_level = top if level > cfg.stc_input_level else level
        found = {}
        for e in range(n.bit_length()):
            for centered in (False, True):
                n1, baby, giant = bsgs_steps(ks, n, 1 << e, centered=centered)
                steps = frozenset(s % full for s in baby + giant if s % n)
                if len(baby) <= MAC_BABIES and steps not in found:
                    b, gi = len([s for s in baby if s]), len([s for s in giant if s])
                    found[steps] = ((n1, centered), b, gi)
        fewest = min(b + gi for _, b, gi in found.values())
        limbs = params.limbs(level).stop
        kept = sorted(((v, steps) for steps, v in found.items() if v[1] + v[2] <= fewest + 2),
                      key=lambda vs: (vs[0][1] + vs[0][2], vs[0][0][1], vs[0][0][0]))
        options.append([(choice, {s: key_level for s in steps}, limbs * (BABY_WEIGHT * b + GIANT_WEIGHT * gi))
                        for (choice, b, gi), steps in kept])

    def key_bytes(plan):
        keys = {}
        for _, steps, _ in plan:
            for s, lvl in steps.items():
                if s not in free:
                    keys[s] = max(keys.get(s, 0), lvl)
        return sum(switching_key_bytes(params.n, params.key_limbs(lvl).stop, special, alpha) for lvl in keys.values())

    def fastest(plans, fixed):  # of `plans` (some stages' options), with `fixed` for the others
        return min(plans, key=lambda plan: (key_bytes(list(plan) + fixed) > budget, sum(t for _, _, t in plan)))

    reference = [opts[0] for opts in options]  # per stage the fewest rotations, the smallest plain n1
    budget = key_bytes(reference)
    cts = fastest(itertools.product(*options[: cfg.cts_levels]), reference[cfg.cts_levels :])
    stc = fastest(itertools.product(*options[cfg.cts_levels :]), list(cts))
    return tuple(c for c, _, _ in cts), tuple(c for c, _, _ in stc)


def key_levels(params, cfg: BootstrapConfig, slot_counts) -> dict:
    """{rotation step: level its key must hold} for bootstrapping each of `slot_counts` slots:
    CoeffToSlot's and SubSum's steps run at the top (keys over every limb), SlotToCoeff's only
    up to the level they are used at (keys over fewer limbs). ctx.keygen(bootstrap=True) makes
    these."""
    out = {}
    for n in slot_counts:
        for step, lvl in rotation_levels(params, cfg, int(n)).items():
            lvl = params.max_level if lvl >= cfg.top - cfg.cts_levels else lvl
            out[step] = max(out.get(step, 0), lvl)
    return out


def estimate_key_bytes(params, cfg: BootstrapConfig, slot_counts=None, *, power_of_two_rotations: bool = True) -> int:
    """Bytes of the keys ctx.keygen(bootstrap=True, bootstrap_slots=slot_counts) makes (default:
    the full packing, which every size can bootstrap through), computed from the parameters
    without generating any: public, relinearisation, conjugation, +-2^i and the DFTs' rotation
    keys (each over the limbs of its levels), the encapsulation keys. It equals ctx.key_bytes()
    after that keygen on a fresh context."""

    n, full, top = params.n, params.n // 2, params.max_level
    special, alpha = len(params.special_primes), params.alpha

    def key(level):
        return switching_key_bytes(n, params.key_limbs(level).stop, special, alpha)

    per_element = {2 * n - 1: top}  # conjugation; {Galois element: level its key holds}
    if power_of_two_rotations:
        per_element.update({galois_element(s, n): top for i in range(full.bit_length() - 1) for s in (1 << i, -(1 << i))})
    for step, lvl in key_levels(params, cfg, [full] if slot_counts is None else slot_counts).items():
        if step % full:
            g = galois_element(step, n)
            per_element[g] = max(per_element.get(g, 0), lvl)
    lvl0, enc_special = params.encapsulation_limbs
    to_sparse = 2 * (lvl0.stop + len(enc_special)) * n * 4
    public = 2 * len(params.primes) * n * 4
    return sum(key(lvl) for lvl in per_element.values()) + key(top) + to_sparse + key(top) + public


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


def bootstrap(ctx, ct: Ciphertext) -> Ciphertext:
    """A refreshed copy of `ct` at level `user_levels` of a bootstrappable preset. Keys:
    ctx.keygen(bootstrap=True).

    Raises ParameterError for a preset that is not bootstrappable, MissingKeyError without the
    bootstrapping keys."""
    return ctx.bootstrapper.bootstrap(ct)


def bootstrap_pair(ctx, a: Ciphertext, b: Ciphertext) -> tuple:
    """Two real-valued Ciphertexts refreshed by one bootstrapping of a + i b.

    Raises SlotError when they pack different slot counts, and what bootstrap() raises."""
    return ctx.bootstrapper.bootstrap_pair(a, b)


def rotations(ctx, slots=None) -> dict:
    """{step: highest level used} of the rotation keys bootstrapping `slots` (default: all) needs."""
    return ctx.bootstrapper.rotations(ctx.slots if slots is None else slots)

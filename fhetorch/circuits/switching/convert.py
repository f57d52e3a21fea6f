"""CKKS <-> TFHE scheme switching (Chameleon, Wang et al.; its Pegasus background, Lu et al. 2021):
a CKKS ciphertext's real slot values through any function by TFHE lookup tables and back.

CKKS -> LWE (to_lwe):
  1. the drop to SlotToCoeff's levels, x - lo, then SlotToCoeff (bootstrapping's stages): slot k's value becomes the
     polynomial coefficient bitrev(k) (k < N/2; the stages work in bit-reversed order);
  2. the drop to level 0 multiplies by an integer so that coefficient k is Q_0 v_k / 2G, v_k =
     (x_k - lo)(G - 1) / (hi - lo) the value's position on the LUT grid of G points (a TFHE
     message with one padding bit), or Q_0 v_k / G for the full-torus grid (one bit more);
  3. modulus switch Q_0 -> q (the TFHE modulus): round(c q / Q_0), float64 (one rounding, the
     same on CPU and GPU; its error, < 2^10 per coefficient, is ~2^-50 of q);
  4. GLWE key switch s -> z(X^r) in the CKKS ring (keys.to_lwe), then sample extraction of
     the M slots' coefficients: z(X^r) has non-zeros only at multiples of r, so each extraction is an
     LWE of dimension N_t under z, the TFHE GLWE key: the form a PBS output has.
LUT (apply_luts): the TFHE KS-PBS with a test polynomial holding the encoded f(grid point) in each
  point's window; several functions in one batched PBS through a per-ciphertext LUT index. On the
  full torus point u + G/2 reads the negated window of point u, so f = a + s b with a(u) =
  (f(u) + f(u + G/2)) / 2, b(u) = (f(u) - f(u + G/2)) / 2 and s = -1 on the second half: b's
  table stores asin(b / F) / 2 pi (sin is odd: s b comes back), a's stores acos(a / F) / 2 pi and
  a quarter turn is added after the PBS (sin(pi / 2 + x) = cos x is even: a comes back for both
  signs). The two are summed in CKKS.
LWE -> CKKS (to_ckks):
  1. LWE packing in ring N_t (fhetorch/_tfhe/glwe.py): slot k's value goes to coefficient
     p = bitrev(k) = r i + c, into group c at index i (groups without values are not packed);
  2. Y -> X^r and X^c place group c's coefficient i at p; their sum is one GLWE of the CKKS ring
     under z(X^r); the key switch back (keys.to_ckks) gives an RLWE under s modulo q;
  3. modulus switch q -> Q_0, then bootstrapping's ModRaise, CoeffToSlot and EvalMod: slot k
     holds sin(2 pi t_k / Q_0). The LUT stored theta = asin(f / F) / 2 pi (|theta| <= 1/4,
     F = max(1, max|f|)), so the sine gives f / F exactly; F is a scale label (1 for outputs in
     [-1, 1]). The result sits at
     EvalMod's output level (SlotToCoeff's levels are not spent). An M-slot result (M < N/2)
     is made to repeat every M slots by log2(N / 2M) rotations and additions. A full-torus
     pair (a, b) of M <= N/4 values goes back as one 2M-value packing, a then b, and one rotation
     by M adds b to a; at M = N/2 the two go back separately.
"""
from __future__ import annotations

import math
import time

import torch

from ... import _ops
from ..._ckks import evaluator as ev
from ..._ckks.ciphertext import Ciphertext
from ..._tfhe import algorithms as alg
from ..._tfhe import glwe as _glwe
from ..._tfhe.lut import test_polynomial
from ...errors import LevelError, ParameterError
from ..bootstrap import _dft_stages, dft_baby_steps
from ..dft import bit_reverse
from ..linear import LinearTransform
from .keys import SwitchKeys


# the PBS runs in chunks whose rotation scratch stays within this where the op does not bound it
# itself (the large-ring programs keep theirs within 1 GiB; the per-bit launches of multi-bit keys on
# large rings hold an accumulator and digits per ciphertext, 4 MiB at N_t = 2^16)
PBS_SCRATCH_BYTES = 4 << 30


def grid_points(interval, bits: int) -> torch.Tensor:
    """The G = 2^bits float64 points of the LUT grid over [lo, hi], both ends included."""
    lo, hi = interval
    g = 1 << bits
    return lo + (hi - lo) * torch.arange(g, dtype=torch.float64) / (g - 1)


def check_interval(interval) -> tuple:
    try:
        lo, hi = (float(v) for v in interval)
    except (TypeError, ValueError):
        raise ParameterError(f"lut: interval must be (lo, hi), two numbers, got {interval!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ParameterError(f"lut: interval must be finite with lo < hi, got ({lo}, {hi})")
    return lo, hi


def tabulate(fn, points: torch.Tensor) -> torch.Tensor:
    """fn at the grid points, float64: fn on the float64 tensor of points when it returns one
    value per point, else fn point by point on floats.
    Raises ParameterError for outputs that are not finite real numbers."""
    try:
        y = torch.as_tensor(fn(points.clone()), dtype=torch.float64).reshape(-1)
    except (TypeError, ValueError, RuntimeError):  # a function of floats only
        y = None
    if y is None or y.numel() != points.numel():
        try:
            y = torch.tensor([float(fn(float(p))) for p in points], dtype=torch.float64)
        except (TypeError, ValueError, ZeroDivisionError, OverflowError) as e:
            raise ParameterError(f"lut: the function failed on the grid points ({e})") from None
    if not bool(torch.isfinite(y).all()):
        raise ParameterError("lut: the function is not finite at every grid point of the interval")
    return y


class Switcher:
    """Scheme switching for one CKKS Context holding SwitchKeys (ctx.switcher); keeps the forward
    SlotToCoeff's encoded diagonals."""

    def __init__(self, ctx, keys: SwitchKeys):
        self.ctx, self.keys = ctx, keys
        self.cfg = ctx.bootstrapper.cfg
        self.params = keys.tfhe.params
        self._stc = None
        self._default_bits = None
        self._grids: dict = {}
        self._geometry: dict = {}
        # seconds per phase ("to_lwe", "pbs", "to_ckks") added up over lut() calls, the device
        # synchronised around each phase, while a caller sets a dict here (a model's breakdown)
        self.phase_times: dict | None = None

    @property
    def default_bits(self) -> int:
        """The finest half-torus grid the TFHE set holds within the failure bound (one PBS per
        value and function): lut's default."""
        if self._default_bits is None:
            self._default_bits = self.keys.config.default_bits(self.params)
        return self._default_bits

    @property
    def max_bits(self) -> int:
        """The finest grid within the failure bound: default_bits + 1, on the full torus (two PBS
        per value and function)."""
        return self.default_bits + 1

    def full_torus(self, bits: int) -> bool:
        """Whether a grid of `bits` takes the full-torus form (bits above default_bits)."""
        return bits > self.default_bits

    def grid(self, bits: int | None):
        """(bits, the TFHEParams whose log2_p_fail is the grid's). Raises ParameterError above
        max_bits."""
        top = self.max_bits
        bits = self.default_bits if bits is None else bits
        if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= top:
            raise ParameterError(
                f"lut: bits must be an int in [1, {top}] with the TFHE set {self.params.name} (a grid of 2^bits "
                f"points holds with failure probability <= 2^{self.keys.config.log2_p_fail_max:g} per value up to "
                f"{top} bits); got {bits!r}. A larger ring holds more: ctx.keygen(lut='tfhe-6bit') (N = 2^13, 7 bits), "
                "'tfhe-8bit' (N = 2^15, 9 bits) or 'tfhe-8bit-p128' (N = 2^16, 10 bits)")
        p = self._grids.get(bits)
        if p is None:
            p = self._grids[bits] = self.keys.config.grid_failure(self.params, bits)
        return bits, p

    def geometry(self, m: int, device) -> tuple:
        """(pos, groups, where, stride, count) for m slot values, made once per size and device:
        slot k's coefficient pos[k] = bitrev(k), the packing groups (residues pos mod r that hold
        values), each value's group index, the largest power of two dividing every index pos // r
        in ring N_t (the packing's stride: m values need no N_t-leaf tree), and the packing's leaf
        count, the power of two above every pos // r // stride (values sit in the first half of
        CKKS's coefficients, so at most N_t / (2 stride): the tree skips the zero half)."""
        key = (m, str(device))
        g = self._geometry.get(key)
        if g is None:
            pos = bit_reverse(self.ctx.slots)[:m]
            r = self.keys.stride
            groups = torch.unique(pos % r)
            where = torch.searchsorted(groups, pos % r)
            nt = self.ctx.params.n // r
            stride = nt
            for i in (pos // r).tolist():
                while i % stride:
                    stride //= 2
            count = 1 << int((pos // r // stride).max()).bit_length()
            g = self._geometry[key] = tuple(t.to(device) for t in (pos, groups, where)) + (stride, count)
        return g

    # --- CKKS -> LWE --------------------------------------------------------------------------
    def _slot_to_coeff(self) -> list:
        if self._stc is None:
            _, stc = _dft_stages(self.ctx.params, self.cfg, self.ctx.slots)
            _, n1s = dft_baby_steps(self.ctx.params, self.cfg, self.ctx.slots)  # the keys bootstrapping made
            self._stc = [LinearTransform.from_diagonals(self.ctx, g, m, n1=n1, centered=c)
                         for (g, m), (n1, c) in zip(stc, n1s)]
        return self._stc

    @property
    def output_level(self) -> int:
        """The level a LUT's result sits at: EvalMod's output."""
        return self.cfg.stc_input_level

    @property
    def levels(self) -> int:
        """Levels the input needs: SlotToCoeff's, and one for the grid's scaling."""
        return self.cfg.stc_levels + 1

    def to_lwe(self, ct: Ciphertext, interval, bits: int) -> torch.Tensor:
        """(..., M, N_t + 1) LWE ciphertexts under z whose phase is q v / 2G, v the grid position of
        each of ct's M slot values (q v / G on the full torus, bits > default_bits). Raises
        LevelError below `levels` levels."""
        ctx = self.ctx
        lo, hi = interval
        if ct.level < self.levels:
            raise LevelError(f"lut: the switch to TFHE needs {self.levels} levels (SlotToCoeff and the grid's "
                             f"scaling); the tensor is at level {ct.level}: bootstrap it first")
        g = 1 << bits
        span = g if self.full_torus(bits) else 2 * g  # grid positions per turn of the torus
        # SlotToCoeff runs at the lowest levels it can (its keys hold only those limbs; fewer is faster)
        x = ev.drop_level(ctx, ct, ct.level - self.levels)
        x = ev.add_scalar(ctx, x, -lo, "lut").replace(slots=ctx.slots)
        for lt in self._slot_to_coeff():
            x = lt(x)
        x = ev.drop_level(ctx, x, x.level - 1)
        q0 = ctx.basis(0).product
        target = q0 * (g - 1) / (span * (hi - lo))  # the level-0 scale that puts v_k on the grid
        k = round(ev._target_scale_factor(ctx, x) * target / ctx.nominal_scale(0))
        b = ctx.basis(x.level)
        from_ = x.scale
        x = ev.rescale(ctx, x.replace(data=_mul_const(x.data, b, k), scale=from_ * k))
        assert abs(x.scale / target - 1) < 2.0 ** -16, (x.scale, target)
        return self.level0_to_lwe(x.replace(slots=ct.slots))

    def level0_to_lwe(self, x: Ciphertext) -> torch.Tensor:
        """Steps 3-4 of to_lwe, exact integer work (the same bits on CPU and CUDA): a level-0
        ciphertext of x.slots values -> their LWE ciphertexts under z."""
        ctx = self.ctx
        q0 = ctx.basis(0).product
        if q0 >= 1 << 62:
            raise ParameterError("lut: level 0's modulus must be below 2^62")
        c = ctx.ring.to_int64(x.data, ctx.basis(0))  # (..., 2, N) in (-Q_0/2, Q_0/2]
        q = self.keys.ring.modulus.q
        c = torch.remainder(torch.round(c.to(torch.float64) * (q / q0)).to(torch.int64), q)
        mq = self.keys.ring.modulus
        glwe = torch.stack((mq.neg(c[..., 1, :]), c[..., 0, :]), -2)  # phase c0 + c1 s = B - A s
        glwe = _glwe.keyswitch_glwe_ciphertext(self.keys.ring, self.keys.to_lwe, glwe)
        return self._extract(glwe, self.geometry(x.slots, glwe.device)[0])

    def _extract(self, glwe: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """LWE of the coefficients at `positions` (m,) under z: a_i = +-A[(j - r i) mod N], minus
        where it wraps."""
        big_n, r = glwe.shape[-1], self.keys.stride
        nt, m = big_n // r, positions.numel()
        j = positions.view(m, 1)
        t = j - r * torch.arange(nt, device=glwe.device).view(1, nt)
        a = glwe[..., 0, :][..., torch.remainder(t, big_n)]  # (..., m, N_t)
        a = torch.where(t < 0, self.keys.ring.modulus.neg(a), a)
        return torch.cat((a, glwe[..., 1, positions].unsqueeze(-1)), -1)

    # --- the LUTs --------------------------------------------------------------------------
    def encode_outputs(self, values: torch.Tensor, f_scale: float | None = None, cosine: bool = False) -> tuple:
        """(test polynomial body values mod q as int64, F): theta = asin(f / F) / 2 pi with
        F = max(1, max|f|) unless given, so |theta| <= 1/4 and EvalMod's sine gives f / F back
        (cosine: acos(f / F) / 2 pi, what a quarter turn later turns into f / F). F = 1 (outputs
        in [-1, 1], what fhetorch.nn's scaled values are) leaves the result's scale at its level's
        nominal one: later additions need no level to match scales."""
        q = self.keys.ring.modulus.q
        if f_scale is None:
            f_scale = max(1.0, float(values.abs().max()))
        y = (values / f_scale).clamp(-1.0, 1.0)
        theta = (torch.acos(y) if cosine else torch.asin(y)) / (2 * math.pi)
        return torch.remainder(torch.round(theta * q).to(torch.int64), q), f_scale

    def apply_luts(self, lwe: torch.Tensor, tables: list, bits: int) -> tuple:
        """KS-PBS of every LWE once per table (float64 outputs at the G grid points); returns
        (outputs, [F per table]): per table a (..., M, N_t + 1) tensor, or on the full torus
        (bits > default_bits) the pair (a, b) whose sines add up to f / F."""
        keys, mq = self.keys, self.keys.ring.modulus
        p, t = self.params, keys.tfhe
        full = self.full_torus(bits)
        space = (1 << bits) // 2 if full else 1 << bits  # the test polynomial's points (half the torus)
        encoded, scales = [], []
        for values in tables:
            if full:  # f = a + s b: point u + G/2 reads the negated window of u (module docstring)
                lo_half, hi_half = values[:space], values[space:]
                a, b = (lo_half + hi_half) / 2, (lo_half - hi_half) / 2
                f_scale = max(1.0, float(a.abs().max()), float(b.abs().max()))
                encoded += [self.encode_outputs(a, f_scale, cosine=True)[0], self.encode_outputs(b, f_scale)[0]]
            else:
                enc, f_scale = self.encode_outputs(values)
                encoded.append(enc)
            scales.append(f_scale)
        luts = torch.stack([test_polynomial([e.tolist()], space, p.N, 1, mq.q) for e in encoded]).to(lwe.device)
        c = len(encoded)
        ks = alg.keyswitch_lwe_ciphertext(t.keyswitch_key, lwe.contiguous(), mq)  # once for all c tables
        if p.modulus_switch_type == "centered":
            ks = alg.center_modulus_switch(ks, mq, p.log_n + 1, p.secret_distribution)
        x = ks.unsqueeze(0).expand(c, *ks.shape).reshape(-1, ks.shape[-1])
        index = torch.arange(c, device=lwe.device).repeat_interleave(x.shape[0] // c)
        rows = max(1, PBS_SCRATCH_BYTES // (8 * 2 * (1 + p.pbs_level) * p.N))  # a chunk's rotation scratch
        out = torch.cat([alg.programmable_bootstrap_lwe_ciphertext(t.ring, t.bootstrap_key, x[i:i + rows], luts,
                                                                   index[i:i + rows] if c > 1 else None)[0]
                         for i in range(0, x.shape[0], rows)])
        out = out.view(c, *lwe.shape[:-1], out.shape[-1])
        if not full:
            return list(out.unbind(0)), scales
        quarter = out.new_zeros(out.shape[-1])
        quarter[-1] = mq.q // 4  # a quarter turn on the cosine tables' bodies
        return [(mq.add(out[2 * i], quarter), out[2 * i + 1]) for i in range(len(tables))], scales

    # --- LWE -> CKKS ------------------------------------------------------------------------
    def to_ckks(self, lwe, f_scale: float) -> Ciphertext:
        """(..., M, N_t + 1) LWE ciphertexts under z of phases q theta -> a CKKS ciphertext of M
        slots holding F sin(2 pi theta), at EvalMod's output level. A full-torus pair (a, b):
        F (sin(2 pi theta_a) + sin(2 pi theta_b)), for M <= N/4 through one packing of 2M values
        (a then b) and one rotation by M."""
        if isinstance(lwe, torch.Tensor):
            return self.level0_to_slots(self.lwe_to_level0(lwe), lwe.shape[-2], f_scale)
        a, b = lwe
        m = a.shape[-2]
        if 2 * m > self.ctx.slots:
            return ev.add(self.ctx, self.to_ckks(a, f_scale), self.to_ckks(b, f_scale))
        both = self.to_ckks(torch.cat((a, b), -2), 1.0)  # repeats every 2M slots: a, b, a, b, ...
        out = ev.add(self.ctx, both, ev.rotate(self.ctx, both, m))
        return out.replace(scale=out.scale / f_scale, slots=m)

    def lwe_to_level0(self, lwe: torch.Tensor) -> Ciphertext:
        """Steps 1-2 of to_ckks, exact integer work (the same bits on CPU and CUDA): a level-0
        CKKS ciphertext whose coefficient bitrev(k) has LWE k's phase, scaled to Q_0."""
        ctx, keys = self.ctx, self.keys
        mq, big_n, r = keys.ring.modulus, ctx.params.n, keys.stride
        nt, m, half = big_n // r, lwe.shape[-2], ctx.slots
        if half % m:
            raise ParameterError(f"lut: {m} values do not divide the {half} slots")
        pos, groups, where, stride, count = self.geometry(m, lwe.device)  # the residues and leaves that hold values
        batch = lwe.shape[:-2]
        leaves = lwe.new_zeros(*batch, groups.numel(), count, nt + 1)
        leaves[..., where, pos // r // stride, :] = lwe
        packed = _glwe.pack_lwe_ciphertexts(keys.tfhe.ring, keys.packing, leaves, stride)  # (..., groups, 2, N_t)
        big = lwe.new_zeros(*batch, 2, nt, r)
        big[..., groups] = packed.permute(*range(len(batch)), -2, -1, -3)
        big = _glwe.keyswitch_glwe_ciphertext(keys.ring, keys.to_ckks, big.reshape(*batch, 2, big_n))  # under s
        q, q0 = mq.q, ctx.basis(0).product
        centred = torch.where(big > q // 2, big - q, big)
        y = torch.round(centred.to(torch.float64) * (q0 / q)).to(torch.int64)
        data = ctx.ring.from_integers(torch.stack((y[..., 1, :], -y[..., 0, :]), -2).contiguous(), ctx.basis(0))
        return Ciphertext(data, 0, float(q0), half)

    def level0_to_slots(self, ct0: Ciphertext, m: int, f_scale: float) -> Ciphertext:
        """Step 3 of to_ckks: ModRaise, CoeffToSlot, EvalMod (and a sparse result's rotations)."""
        ctx = self.ctx
        half = ctx.slots
        bs = ctx.bootstrapper
        x = bs.mod_raise(ct0)
        for lt in bs.cts_transforms(half):
            x = lt(x.replace(slots=lt.n))
        out = bs.eval_mod(ev.add(ctx, x, ev.conj(ctx, x)))  # slot k < M: F sin; the others 0
        step = m
        while step < half:  # the M-slot packing repeats its values every M slots
            out = ev.add(ctx, out, ev.rotate(ctx, out, step))
            step *= 2
        return out.replace(scale=out.scale / f_scale, slots=m)

    # --- the whole switch ----------------------------------------------------------------------
    def lut(self, ct: Ciphertext, fns, interval, bits: int | None = None) -> list:
        """[fn(x quantised to the grid) for fn in fns] as Ciphertexts of ct's slots. Raises
        ParameterError (interval, bits, fn), LevelError (too few levels), EncodingError for a
        complex-valued ct is not detectable here: the caller checks."""
        interval = check_interval(interval)
        bits, _ = self.grid(bits)
        points = grid_points(interval, bits)  # both forms: G points over [lo, hi]
        tables = [tabulate(fn, points) for fn in fns]
        t = self._phase(None, ct.data.device)
        lwe = self.to_lwe(ct, interval, bits)
        t = self._phase("to_lwe", ct.data.device, t)
        outs, scales = self.apply_luts(lwe, tables, bits)
        t = self._phase("pbs", ct.data.device, t)
        out = [self.to_ckks(o, s) for o, s in zip(outs, scales)]
        self._phase("to_ckks", ct.data.device, t)
        return out

    def _phase(self, name, device, since: float = 0.0) -> float:
        """With phase_times set: the time now (device synchronised), name's seconds since `since` added."""
        if self.phase_times is None:
            return 0.0
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        now = time.perf_counter()
        if name is not None:
            self.phase_times[name] = self.phase_times.get(name, 0.0) + now - since
        return now


def _mul_const(data: torch.Tensor, basis, k: int) -> torch.Tensor:
    return _ops.mul_const(data.contiguous(), basis.scalar(k), basis.mod)

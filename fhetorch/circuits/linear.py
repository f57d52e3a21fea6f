"""Plaintext matrix times encrypted vector: the diagonal method with baby-step giant-step.

For an n x n matrix M (n = the ciphertext's slots, a power of two) and diagonals
diag_k[i] = M[i, (i + k) mod n],

    M x = sum_k diag_k * rot_k(x)
        = sum_g rot_(g n1)( sum_b diag'_(g,b) * rot_b(x) ),   k = g n1 + b, 0 <= b < n1,

with diag'_(g,b) = rot_(-g n1)(diag_(g n1 + b)) (Halevi-Shoup; the BSGS form of Bossuat et
al. 2021). The baby-step rotations rot_b(x) share one ModUp (evaluator.rotate_hoisted); the
products with the pre-rotated diagonals are accumulated without rescaling, each inner sum
is rotated by its giant step, and the total is rescaled once: one level. The diagonals are
encoded once per (level, input scale), at the scale that puts the result exactly on the next
level's nominal scale. Zero diagonals are skipped; n1 (a power of two) is chosen to minimise
the number of distinct rotations for the matrix's nonzero diagonals (n1 = n with bsgs=False:
the plain, fully hoisted diagonal method). Centered baby steps (b in [-n1/2, n1/2), any split
g + b = k mod n works) use other keys for as many rotations: bootstrapping's DFTs pick, stage
by stage, what needs the fewest key bytes (circuits/bootstrap.py dft_baby_steps).

Fused evaluation (Cheddar Par.5; the double hoisting of Bossuat et al. 2021), used whenever
every step has a direct key: one ModUp of x's second component; one kernel (the
`hoisted_mac` op) forms every baby-step rotation over P*Q (key products and automorphisms,
no ModDown, nothing stored per rotation) and accumulates the diagonal products (diagonals
encoded over the level's limbs and P) into one P*Q sum per giant step. The nonzero giant
sums of a hoisted_mac call are brought down together (one batched ModDown), their second
components lifted together (one batched ModUp: a single giant's rows fill too little of the
GPU), and their rotations' key switches left over P*Q and summed in one pass
(`keyswitch_inner_sum`, the digits rotated after the ModUp as in hoisting); a single modulus
switch then drops P and rescales. Per transform: 1 + giants ModUps and `giants` ModDowns,
against baby + giants + 1 ModDowns of the plain BSGS, in 2 + 4 ops per hoisted_mac call. Since
ModDown(sum pt * P u) carries one rounding instead of one per term, it is also a little more
precise. A hoisted_mac call takes at most 8 giant and 16 baby steps: larger transforms make
several calls, their diagonals encoded one batch per call group (encoding each diagonal on
its own costs host round trips: a ResNet-20 encodes ~12000 per inference). The plain path
(below) stays for composed rotations and CUDA sizes the fused kernels do not cover.

Rotation keys: `rotations()` lists the steps used. A step without a direct key is composed
from available keys (evaluator.rotate); where that is impossible a MissingKeyError names it.
"""
from __future__ import annotations

import torch

from .. import _ops
from .._ckks import evaluator as ev
from .._ckks.context import galois_element
from ..errors import EncodingError, MissingKeyError, ShapeError, SlotError
from .._rlwe.keyswitch import keyswitch_inner_sum, mod_up, switch_modulus

MAC_BABIES, MAC_GIANTS = 16, 8  # per hoisted_mac call (csrc/hoisted_mac.h)


def _diagonals(m: torch.Tensor) -> dict:
    """{k: diag_k} for the nonzero generalised diagonals of a square matrix."""
    n = m.shape[0]
    i = torch.arange(n)
    out = {}
    for k in range(n):
        d = m[i, (i + k) % n]
        if bool((d != 0).any()):
            out[k] = d
    return out


def _decompose(k: int, n1: int, n: int, centered: bool = False) -> tuple:
    """(giant, baby) steps mod n with giant + baby = k: baby = k mod n1, or with `centered` in
    [-n1/2, n1/2) (stored mod n; its key is the step n - |baby|), giant a multiple of n1."""
    b = k % n1
    if centered and 2 * b >= n1:
        b -= n1
    return (k - b) % n, b % n


def _split(ks, n1: int, n: int, centered: bool = False):
    parts = [_decompose(k, n1, n, centered) for k in ks]
    return sorted({b for _, b in parts}), sorted({g for g, _ in parts})


def bsgs_steps(ks, n: int, n1: int | None = None, bsgs: bool = True, centered: bool = False) -> tuple:
    """(n1, baby steps, giant steps) for diagonals at offsets ks (centered: babies in
    [-n1/2, n1/2), stored mod n): n1 (a power of two) chosen to minimise the distinct rotations
    unless given; n1 = n without bsgs."""
    ks = sorted(ks)
    if n1 is None:
        if bsgs and ks:
            cands = [1 << i for i in range(n.bit_length())]
            # fewest distinct rotations (keys) first; among those the fewest giant steps: a baby
            # step of the fused path only reads its key, a giant step is a whole key switch
            def cost(n1):
                baby, giant = _split(ks, n1, n, centered)
                giants = len([s for s in giant if s])
                return len([s for s in baby if s]) + giants, giants

            n1 = min(cands, key=lambda n1: (cost(n1), n1))
        else:
            n1 = n
    baby, giant = _split(ks, int(n1), n, centered)
    return int(n1), baby, giant


def rotation_steps(ks, n: int, n1: int | None = None, centered: bool = False) -> list:
    """The rotation steps a transform with diagonals at offsets ks (and baby-step size n1, default
    bsgs_steps' choice) uses (LinearTransform.rotations)."""
    _, baby, giant = bsgs_steps(ks, n, n1, centered=centered)
    return _steps(baby, giant, n)


def _steps(baby, giant, n: int) -> list:
    return sorted({s for s in baby + giant if s % n})


class LinearTransform:
    """y = M x for a plaintext (n, n) matrix M on ciphertexts of n slots. `lt(ct)` evaluates it.

    Raises ShapeError for a matrix that is not square, SlotError when n is not the ciphertexts'
    slot count (a power of two up to ctx.slots), EncodingError for NaN or inf entries."""

    levels = 1

    def __init__(self, ctx, matrix, *, level: int | None = None, slots: int | None = None, bsgs: bool = True):
        m = torch.as_tensor(matrix)
        if m.dim() != 2 or m.shape[0] != m.shape[1]:
            raise ShapeError(f"LinearTransform: the matrix must be square, got shape {tuple(m.shape)}; pad it")
        n = m.shape[0]
        slots = n if slots is None else int(slots)
        if n != slots or n < 1 or n & (n - 1) or n > ctx.slots:
            raise SlotError(f"LinearTransform: the matrix must be n x n with n = the ciphertext's slots (a power of "
                            f"two <= {ctx.slots}); got {n} x {n} for {slots} slots")
        m = m.to(torch.complex128 if m.is_complex() else torch.float64).cpu()
        if not bool(torch.isfinite(torch.view_as_real(m.to(torch.complex128))).all()):
            raise EncodingError("LinearTransform: the matrix contains NaN or inf")
        self._setup(ctx, _diagonals(m), n, bsgs, level)

    @classmethod
    def from_diagonals(cls, ctx, diagonals: dict, n: int, *, level: int | None = None, bsgs: bool = True,
                       n1: int | None = None, centered: bool = False):
        """The transform sum_k diag_k * rot_k(x) from {k: diag_k} (length-n vectors, k mod n), without
        forming the matrix (the DFTs of bootstrapping have n up to 2^15). n1: force the baby-step count;
        centered: baby steps in [-n1/2, n1/2) (their keys are other steps: bootstrapping's plan
        picks what needs the fewest key bytes).

        Raises SlotError when n is not a power of two up to ctx.slots, ShapeError for a diagonal
        that is not of length n."""
        if n < 1 or n & (n - 1) or n > ctx.slots:
            raise SlotError(f"LinearTransform: n must be a power of two <= {ctx.slots}, got {n}")
        diags = {}
        for k, d in diagonals.items():
            d = torch.as_tensor(d).cpu()
            if d.shape != (n,):
                raise ShapeError(f"LinearTransform: diagonal {k} has shape {tuple(d.shape)}, expected ({n},)")
            if bool((d != 0).any()):
                diags[int(k) % n] = d + diags.get(int(k) % n, 0)
        self = cls.__new__(cls)
        self._setup(ctx, diags, n, bsgs, level, n1, centered)
        return self

    def _setup(self, ctx, diags: dict, n: int, bsgs: bool, level, n1=None, centered: bool = False):
        self.ctx, self.n, self.bsgs = ctx, n, bool(bsgs)
        self.fuse = True  # the fused evaluation where it applies (False: always the plain BSGS path)
        # False: encode the diagonals at every call and drop them after (memory for time: a
        # model's many transforms would not fit the GPU with every diagonal encoded)
        self.cache_encodings = True
        ks = sorted(diags)
        self.n1, self.baby, self.giant = bsgs_steps(ks, n, n1, bsgs, centered)
        # {giant step g: [(baby step b, diagonal pre-rotated by g)]}
        self._by_giant = {}
        for k in ks:
            g, b = _decompose(k, self.n1, n, centered)
            self._by_giant.setdefault(g, []).append((b, torch.roll(diags[k], g).to(ctx.device)))
        self._encoded, self._coeffs = {}, {}
        if level is not None:
            self._encode(level, ctx.nominal_scale(level), sorted(self._by_giant), extended=self.fuse)

    def rotations(self) -> list:
        """The rotation steps evaluation uses (keys: ctx.keygen(rotations=lt.rotations()))."""
        return _steps(self.baby, self.giant, self.n)

    def encoded_bytes(self) -> int:
        """Memory of the diagonals encoded so far (every level, scale and path), and of the
        coefficients kept when the encodings are not."""
        enc = sum(pt.numel() * pt.element_size() for enc in self._encoded.values()
                  for items in enc.values() for _, pt in items)
        return enc + sum(c.numel() * c.element_size() for c in self._coeffs.values())

    @property
    def tensors(self) -> list:
        """Every tensor this transform keeps: its diagonals, their encodings and coefficients."""
        return ([d for items in self._by_giant.values() for _, d in items]
                + [pt for enc in self._encoded.values() for items in enc.values() for _, pt in items]
                + list(self._coeffs.values()))

    @property
    def nonzero_diagonals(self) -> int:
        return sum(len(v) for v in self._by_giant.values())

    def _scale_factor(self, level: int, scale: float) -> float:
        """The diagonals' scale: it lands the result on the next level's nominal scale."""
        return ev._target_scale_factor(self.ctx, _Probe(level, scale))

    def _encode(self, level: int, scale: float, giants, extended: bool = False) -> dict:
        """{g: [(b, encoded diagonal)]} for the giant steps `giants`, at _scale_factor, over the
        level's limbs (extended: and P's, for the fused path). One batched encoding for all the
        diagonals asked for; cached per (level, scale) unless cache_encodings is off (then the
        coefficients are kept and only the residues redone)."""
        key = ("ext" if extended else "q", level, float(scale))
        cache = self._encoded.setdefault(key, {}) if self.cache_encodings else {}
        todo = [(g, b, d) for g in giants if g not in cache for b, d in self._by_giant[g]]
        if todo:
            ctx = self.ctx
            # the coefficients (the FFT half of encoding, 8 bytes a coefficient) are kept when the
            # residues (4 bytes x (L + K) limbs) are not: later calls redo only the residues, with
            # no range check (no host round trip: a CUDA-graph capture can contain them)
            ckey = (level, float(scale), tuple(giants))
            coeffs = self._coeffs.get(ckey)
            if coeffs is None:
                batch = torch.stack([d for _, _, d in todo])
                coeffs = ctx.encode_coefficients(batch, level=level, scale=self._scale_factor(level, scale),
                                                 slots=self.n).view(len(todo), ctx.n)
                if not self.cache_encodings:
                    self._coeffs[ckey] = coeffs
            pts = ctx.extended_residues(coeffs, level)
            if not extended:
                pts = pts[:, : len(ctx.params.limbs(level))].contiguous()
            for (g, b, _), pt in zip(todo, pts):
                cache.setdefault(g, []).append((b, pt))
        return {g: cache[g] for g in giants}

    def _rotate_hoisted(self, ct, steps) -> dict:
        """{step: rot_step(ct)}: hoisted for steps with a direct key (s or s - n), composed otherwise."""
        ctx = self.ctx
        direct, other = {}, []
        for s in steps:
            c = s if s % self.n == 0 else self._direct_step(s, ct.level)
            if c is None:
                other.append(s)
            else:
                direct[c] = s
        out = {direct[c]: r for c, r in ev.rotate_hoisted(ctx, ct, list(direct)).items()} if direct else {}
        for s in other:
            out[s] = self._rotate(ct, s)
        return out

    def _rotate(self, ct, s):
        try:
            return ev.rotate(self.ctx, ct, s)
        except MissingKeyError as e:
            raise MissingKeyError(f"LinearTransform: no rotation key for step {s} (needed: {self.rotations()}); "
                                  f"generate it with ctx.keygen(rotations=lt.rotations()) on the client") from e

    def __call__(self, ct):
        """M ct for a Ciphertext of n slots, one level lower.

        Raises SlotError for another slot count, LevelError at level 0, MissingKeyError for a
        rotation key that is neither there nor composable."""
        if ct.slots != self.n:
            raise SlotError(f"LinearTransform: built for {self.n} slots, the ciphertext packs {ct.slots}")
        ev._need_level(ct, "LinearTransform")
        ctx = self.ctx
        ct = ev.relinearize(ctx, ct)
        mod = ctx.basis(ct.level).mod
        if not self._by_giant:  # the zero matrix
            out = ct.replace(data=torch.zeros_like(ct.data))
            out = ev.drop_level(ctx, out, 1)
        elif self._fusable(ct):
            out = self._fused(ct)
        else:
            s = self._scale_factor(ct.level, ct.scale)
            try:
                rots = self._rotate_hoisted(ct, self.baby)
            except MissingKeyError as e:
                raise MissingKeyError(f"LinearTransform: {e} (steps needed: {self.rotations()}; generate them with "
                                      "ctx.keygen(rotations=lt.rotations()) on the client)") from e
            acc = None
            giants = sorted(self._by_giant)
            for lo in range(0, len(giants), MAC_GIANTS):
                for g, items in self._encode(ct.level, ct.scale, giants[lo : lo + MAC_GIANTS]).items():
                    inner = None
                    for b, pt in items:
                        term = _ops.mul(rots[b].data, pt, mod)
                        inner = term if inner is None else _ops.add(inner, term, mod)
                    inner = ct.replace(data=inner, scale=ct.scale * s)
                    if g % self.n:
                        inner = self._rotate(inner, g)
                    acc = inner if acc is None else acc.replace(data=_ops.add(acc.data, inner.data, mod))
            out = ev.rescale(ctx, acc)
        return out


    # --- fused evaluation ----------------------------------------------------------------
    def _direct_step(self, s: int, level: int):
        """s or s - n (the same rotation of n slots), whichever has a key covering `level`; None
        if neither (the step is then composed from keys that cover it)."""
        for c in (s, s - self.n):
            if self.ctx.has_galois_key(galois_element(c, self.ctx.n), level):
                return c
        return None

    def _direct(self, s: int, level: int):
        """The Galois element of a direct key for step s covering `level`, or None."""
        c = self._direct_step(s, level)
        return None if c is None else galois_element(c, self.ctx.n)

    def _fusable(self, ct) -> bool:
        ctx = self.ctx
        if not self.fuse:
            return False
        for s in self.baby + self.giant:
            if s % self.n and self._direct(s, ct.level) is None:
                return False
        return True

    def _fused(self, ct):
        ctx = self.ctx
        tables, special, alpha = ctx.modulus_tables, ctx.params.special_limbs, ctx.params.alpha
        s = self._scale_factor(ct.level, ct.scale)
        r = ctx.params.limbs(ct.level)
        ext = tuple(r) + tuple(special)
        ext_mod = ctx.ring.basis(ext).mod
        c = ct.data.contiguous()
        c_p = ev._special_product_consts(ctx, ct.level)
        d = mod_up(tables, c.select(-3, 1), r, special, alpha)
        giants = sorted(self._by_giant)
        total = None
        for lo in range(0, len(giants), MAC_GIANTS):
            chunk = giants[lo : lo + MAC_GIANTS]
            enc = self._encode(ct.level, ct.scale, chunk, extended=True)
            babies = sorted({b for g in chunk for b, _ in enc[g]})
            accs = None
            for blo in range(0, len(babies), MAC_BABIES):  # at most MAC_BABIES rotations per call
                part = self._mac(ct, d, c, c_p, r, enc, chunk, babies[blo : blo + MAC_BABIES], ext_mod)
                accs = part if accs is None else _ops.add(accs, part, ext_mod)
            # giants are sorted steps in [0, n): only a chunk's first can be the zero step, the rest are a run.
            # The zero step's sum needs no rotation: it joins the total over P*Q as it is, first, so that the
            # rotated giants' key switches add it in their pass (no add of its own)
            rot = [gi for gi, g in enumerate(chunk) if g % self.n]
            for gi, g in enumerate(chunk):
                if g % self.n == 0:
                    term = accs.select(-4, gi)
                    total = term if total is None else _ops.add(total, term.contiguous(), ext_mod)
            # the rotated giants: their sums brought down to the level in one batched ModDown, their y1 lifted
            # in one ModUp (a single giant's rows are too few to fill the GPU), then their key switches (the
            # digits rotated after the ModUp: hoisted) + P * sigma(y0) + the total summed over P*Q in one pass
            if rot:
                ys = switch_modulus(tables, accs.narrow(-4, rot[0], len(rot)), ext, tuple(r))
                gels = [self._direct(chunk[gi], ct.level) for gi in rot]
                dy = mod_up(tables, ys.select(-3, 1), r, special, alpha)
                total = keyswitch_inner_sum(tables, dy, [ctx.galois_keys[g] for g in gels], gels, r, special, alpha,
                                            addend=ys.select(-3, 0), c_add=c_p, acc=total)
        dst = tuple(ctx.params.limbs(ct.level - 1))
        data = switch_modulus(tables, total.contiguous(), ext, dst)
        return ct.replace(data=data, level=ct.level - 1, scale=ct.scale * s * ev._ratio(ctx, tuple(r), dst))

    def _mac(self, ct, d, c, c_p, r, enc, chunk, babies, ext_mod):
        """One hoisted_mac call: the sums over `babies` of diagonal * rot_b(x), per giant of
        `chunk`, over P*Q ((len(chunk), 2, L + K, N))."""
        ctx = self.ctx
        gal, kq, kp = [], [], []
        for b in babies:
            if b % self.n:
                gal.append(self._direct(b, ct.level))
                key = ctx.galois_keys[gal[-1]]
                kq.append(key.key_q)
                kp.append(key.key_p)
            else:
                gal.append(1)
                kq.append(c)  # not read
                kp.append(c)
        slot = {b: i for i, b in enumerate(babies)}
        pts, pb, pg = [], [], []
        for gi, g in enumerate(chunk):
            for b, pt in enc[g]:
                if b in slot:
                    pts.append(pt)
                    pb.append(slot[b])
                    pg.append(gi)
        return _ops.hoisted_mac(d, c, kq, kp, gal, r.start, r.start // ctx.params.alpha, c_p, pts, pb, pg,
                                len(chunk), ext_mod)


class _Probe:
    """Level and scale of a ciphertext, for evaluator._target_scale_factor."""

    def __init__(self, level, scale):
        self.level, self.scale = level, scale

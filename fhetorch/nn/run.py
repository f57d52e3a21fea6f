"""Encrypted execution of a compiled model (compiler.py's CompiledModel).

A `Program` turns the layers into layouts and slot maps (layout.py) once; `run` walks the
layers on ciphertexts with the plan's rules (plan.py):

- linear layers stay pending (a SlotMap from a materialised value) and compose while their
  value has no other consumer; a pending value is materialised — one LinearTransform
  (fused BSGS, circuits/linear.py) plus the bias, one level — when a ReLU, an addition, a
  second consumer or the output needs it. Bound factors (compiler.py) scale the map then.
- a ReLU runs its polynomial stages on values in [-1, 1] (no constants: input and output
  share their bound), then x * (...) for the composite form;
- an addition adds two ciphertexts (the lower level wins);
- "act" layers (and ReLUs with relu="lut") go through one switch each, in the product form for
  the factor only, times x (one multiplication); a max pooling runs its tournament
  (maxpool.py): wave 1's differences and bases by slot maps from the input, one switch per wave
  over all the wave's differences (a batch of ciphertexts);
- bootstraps are exactly the plan's (plan.Step.bootstraps: inputs before a layer, the ReLU's
  intermediate before a stage, x or the intermediate before the product); a refreshed value
  serves its later consumers. A level short of what an operation needs raises (the plan and
  the execution disagree: a bug).

All values share one slot count n (the smallest power of two holding every layout); a
bootstrapping of n < N/2 slots is the sparse one.
"""
from __future__ import annotations

import math
import time

import torch
from tqdm import tqdm

from ..circuits.linear import LinearTransform, rotation_steps
from ..circuits.presets import bootstrap_config
from ..circuits.polynomial import evaluate
from .._ckks import evaluator as ev
from .._ckks.graphs import Graphs
from ..errors import ContextError, EncodingError, InternalError, LayoutError, ShapeError
from ..tensor import EncryptedTensor
from .graph import activation_function
from .layout import layer_map, layer_module, model_layouts, model_switch_values
from .lut import FACTOR_INTERVAL, SHARPEN, SHARPEN_LEVELS, LUTReLU, factor, grid_interval
from .argmax import decode, head_maps, step, win_interval
from .maxpool import first_wave_maps, half_relu, larger, lut_interval, tournament
from .plan import relu_stages


class Program:
    def __init__(self, cm):
        self.cm = cm
        layers = cm.layers
        self.modules = modules = dict(cm.graph_module.named_modules())
        layouts, n = model_layouts(layers, modules, cm.params.n // 2)  # the slot count is the largest period
        if cm.argmax:  # the head's differences: one slot per pair of classes
            k = layouts[layers[-1].name].shape[0]
            n = max(n, 1 << (k * (k - 1) // 2 - 1).bit_length())
        self.slots = n
        maps = {}
        for l in layers[1:]:
            if l.kind == "linear":
                maps[l.name], _ = layer_map(l, layer_module(l, modules), layouts[l.inputs[0]], n)
        self.layouts, self.maps = layouts, maps
        # the values each ReLU's or activation's switch converts: one period of its input's layout
        self.switch_values = model_switch_values(layers, layouts, n)
        self.output = layers[-1].name
        self._chains(layers)
        self._max_maps = {l.name: first_wave_maps(n, l, layer_module(l, modules), layouts[l.inputs[0]], layouts[l.name])
                          for l in layers if l.kind == "max"}
        self._max_lts = {}
        self._head = None  # the argmax head's LinearTransforms (compile(argmax=True))
        self._lts = {}
        self._offsets, self._diagonals = {}, {}
        self._bias_pts = {}
        self.graphs = Graphs()
        # keep encoded diagonals only while they are few (a ResNet's would not fit the GPU)
        self.cache_encodings = sum(m.offsets() for _, _, m in self.chains.values() if m is not None) <= 2000

    def _chains(self, layers):
        """Which linear values run() materialises, and from where: a linear layer composes into
        the one reading it while nothing else reads it; a value is materialised when a
        non-linear layer, a second consumer or the output needs it. self.chains:
        {materialised value: (source value, first layer of the chain, composed SlotMap or None)}."""
        users = {}
        for l in layers:
            for i in l.inputs:
                users.setdefault(i, []).append(l)
        pend = {}  # linear value -> (source, first layer, composed map so far)
        self.chains = {}
        for l in layers[1:]:
            if l.kind != "linear":
                continue
            src, m = l.inputs[0], self.maps[l.name]
            if src in pend:  # src was not materialised: extend its chain
                s0, first, m0 = pend[src]
                pend[l.name] = (s0, first, m0 if m is None else (m if m0 is None else m0.then(m)))
            else:
                pend[l.name] = (src, l.name, m)
            nxt = users.get(l.name, [])
            if l.name == self.output or len(nxt) != 1 or nxt[0].kind != "linear":
                self.chains[l.name] = pend.pop(l.name)

    def transform(self, name: str):
        """(LinearTransform or None, scaled bias or None, rotation-sum steps applied first)
        materialising value `name` from its source."""
        if name not in self._lts:
            src, _, m = self.chains[name]
            if m is None:
                self._lts[name] = (None, None, ())
            else:
                b = self.cm.bounds
                raw = self._diagonals.pop(name, None)  # kept by offsets() (keygen), else computed here
                f = b[src] / b[name]  # what m.scaled does to the matrix
                diags = {k: d * f for k, d in (m.diagonals() if raw is None else raw).items()}
                m = m.scaled(b[src], b[name])
                lt = LinearTransform.from_diagonals(self.cm.ctx, diags, self.slots)
                lt.cache_encodings = self.cache_encodings
                self._lts[name] = (lt, m.bias if bool(m.bias.any()) else None, m.presum)
        return self._lts[name]

    def offsets(self, name: str) -> list:
        """The diagonal offsets of the map materialising `name` ([] for none), computed once; the
        diagonals are kept until transform() builds the LinearTransform from them."""
        ks = self._offsets.get(name)
        if ks is None:
            m = self.chains[name][2]
            if m is None:
                ks = []
            else:
                self._diagonals[name] = m.diagonals()
                ks = sorted(self._diagonals[name])
            self._offsets[name] = ks
        return ks

    def rotations(self) -> dict:
        """{rotation step: the highest level a transform uses it at} (from the plan), so keys
        used only below the top hold only the limbs of their levels. No context needed."""
        steps = {}
        plan = {s.name: s for s in self.cm.plan.steps}
        for name, (_, first, m) in self.chains.items():
            if m is None:
                continue
            level = plan[first].level_in  # where the chain's first layer reads its source
            for r in rotation_steps(self.offsets(name), self.slots) + list(m.presum):
                steps[r] = max(steps.get(r, 0), level)
        if self.cm.argmax:  # the head's maps: the differences where the logits are, the others after a switch
            cfg = bootstrap_config(self.cm.params.name)
            level, out = plan[self.output].level_out, cfg.stc_input_level
            level = level if level >= cfg.stc_levels + 2 else cfg.user_levels
            for m, lvl in zip(self._head_maps(), (level, out, out)):
                for r in rotation_steps(sorted(m.diagonals()), self.slots):
                    steps[r] = max(steps.get(r, 0), lvl)
        luts = [l.name for l in self.cm.lut_layers if l.kind != "max"]
        if luts:  # a switch of m < n values repeats its result every m slots: steps m, 2m, .. (n and up: bootstrapping's)
            out = bootstrap_config(self.cm.params.name).stc_input_level
            for m in {self.switch_values[name] for name in luts}:
                while m < self.slots:
                    steps[m] = max(steps.get(m, 0), out)
                    m *= 2
        for name, (pairs, odd) in self._max_maps.items():
            level = plan[name].level_in
            for m in [m for p in pairs for m in p] + ([odd] if odd is not None else []):
                for r in rotation_steps(sorted(m.diagonals()), self.slots):
                    steps[r] = max(steps.get(r, 0), level)
        return steps

    def _head_maps(self) -> tuple:
        return head_maps(self.slots, self.layouts[self.output].shape[0])

    def max_transforms(self, name: str) -> tuple:
        """A max pooling's wave-1 LinearTransforms: ([(difference, base)], odd one out or None)."""
        if name not in self._max_lts:
            pairs, odd = self._max_maps[name]

            def lt(m):
                t = LinearTransform.from_diagonals(self.cm.ctx, m.diagonals(), self.slots)
                t.cache_encodings = self.cache_encodings
                return t

            self._max_lts[name] = ([(lt(d), lt(b)) for d, b in pairs], None if odd is None else lt(odd))
        return self._max_lts[name]

    # --- client side -------------------------------------------------------------------------
    def encrypt(self, ctx, x: torch.Tensor):
        inp = self.cm.layers[0]
        x = torch.as_tensor(x)
        if x.dim() == len(inp.shape) + 1:
            if x.shape[0] != 1:
                raise ShapeError(f"CompiledModel.encrypt: one input at a time, got a batch of {x.shape[0]}")
            x = x[0]
        if tuple(x.shape) != tuple(inp.shape):
            raise ShapeError(f"CompiledModel.encrypt: the model takes {tuple(inp.shape)}, got {tuple(x.shape)}")
        x = x.detach().to("cpu", torch.float64)
        self._check_range(x)
        lay = self.layouts[inp.name]
        v = lay.pack(x / self.cm.bounds[inp.name], self.slots)
        ct = ctx.encrypt_vector(v, slots=self.slots)
        return EncryptedTensor(ctx, ct, (self.slots,), layout=("nn", self.cm.params.name, inp.name, lay))

    def _check_range(self, x: torch.Tensor):
        """EncodingError unless the input lies within its calibrated bound: beyond it the values
        downstream leave their bounds too, where the polynomial ReLUs and bootstrapping are wrong."""
        if not bool(torch.isfinite(x).all()):
            raise EncodingError("CompiledModel.encrypt: the input holds NaN or inf")
        name = self.cm.layers[0].name
        bound, peak = self.cm.bounds[name], float(x.abs().max())
        if peak > bound:
            known = self.cm.peaks.get(name, 0.0)  # bounds are the calibrated peaks x margin, rounded up
            wider = (f" or a wider margin: fhe.nn.compile(model, calibration_inputs, margin="
                     f"{math.ceil(peak / known * 100) / 100:g}) or more") if known > 0 else ""
            raise EncodingError(
                f"CompiledModel.encrypt: the input reaches |x| = {peak:.4g}, beyond its calibrated bound {bound:.4g} "
                f"(the largest calibration value x margin {self.cm.margin:g}); the encrypted result would be wrong. "
                f"Compile with calibration inputs like this one{wider}")

    def decrypt(self, ctx, ey) -> torch.Tensor:
        lay = getattr(ey, "layout", None)
        if not isinstance(lay, tuple) or lay[2] != self._output_name or lay[3] != self.layouts[self.output]:
            raise LayoutError("CompiledModel.decrypt: not an output of this compiled model (cm(cm.encrypt(x)))")
        _check_keys(ctx, ey, "CompiledModel.decrypt")
        v = ctx.decrypt_vector(ey.ciphertext).real.to(torch.float64).cpu()
        if self.cm.argmax:
            return decode(v, self.layouts[self.output].shape[0])
        return (self.layouts[self.output].unpack(v) * self.cm.bounds[self.output]).reshape(1, -1)

    @property
    def _output_name(self) -> str:
        return "argmax" if self.cm.argmax else self.output

    # --- the forward pass ----------------------------------------------------------------------
    def run(self, ctx, ex, progress: bool = False, timing: bool = False, graph: bool | None = None):
        """The forward pass. timing: synchronise around every layer and keep seconds per kind
        ("linear", "relu", "act", "add", "bootstrap") in self.times (for the benchmark's breakdown).
        graph (default: on CUDA, unless progress or timing): the whole pass captured in one CUDA
        graph at the first call (after an eager warm-up) and replayed at the next ones."""
        lay = getattr(ex, "layout", None)
        first = self.cm.layers[0].name
        if not isinstance(lay, tuple) or lay[2] != first or lay[1] != self.cm.params.name \
                or lay[3] != self.layouts[first]:
            raise LayoutError("CompiledModel: the input must come from cm.encrypt(x) of this compiled model")
        _check_keys(ctx, ex, "CompiledModel")
        lut = self.cm.uses_lut
        if graph is None:  # the switch sizes its packing on the host: no capture with LUTs
            graph = not (progress or timing or lut)
        self.graphs.enabled = graph
        out = self.graphs("forward", lambda ct: self._forward(ctx, ct, progress, timing), ex.ciphertext)
        return EncryptedTensor(ctx, out, (self.slots,),
                               layout=("nn", self.cm.params.name, self._output_name, self.layouts[self.output]))

    def _forward(self, ctx, ct, progress: bool, timing: bool):
        """run() on a ciphertext: the output ciphertext."""
        bt = ctx.bootstrapper if self.cm.plan.bootstraps or self.cm.argmax else None  # the head may refresh
        vals = {self.cm.layers[0].name: ct}
        self.bootstraps = 0
        self.times = {"linear": 0.0, "relu": 0.0, "act": 0.0, "max": 0.0, "add": 0.0, "bootstrap": 0.0}
        clock = _Clock(ctx.device, timing)
        self.switch_times = {}  # with timing: the switches' phases (inside "relu", "act", "max")
        if timing and self.cm.uses_lut:
            ctx.switcher.phase_times = self.switch_times
        try:
            return self._layers(ctx, vals, clock, bt, progress)
        finally:
            if timing and self.cm.uses_lut:
                ctx.switcher.phase_times = None

    def _layers(self, ctx, vals, clock, bt, progress: bool):
        """_forward's walk over the layers (and the argmax head): the output ciphertext."""

        def refresh(ct):
            if bt is None:
                raise InternalError("nn: a bootstrap is needed but the plan has none (the level model disagrees)")
            self.bootstraps += 1
            t = clock.now()
            out = bt.bootstrap(ct)
            self.times["bootstrap"] += clock.now() - t
            return out

        steps = {st.name: st for st in self.cm.plan.steps}
        layers = self.cm.layers[1:]
        if progress:
            layers = tqdm(layers, desc="encrypted layers", unit="layer", leave=False)
        for l in layers:
            t0, b0 = clock.now(), self.times["bootstrap"]
            boots = steps[l.name].bootstraps
            for point, v in boots:
                if point == "in":  # before the layer (for a composed map: where its chain starts)
                    vals[v] = refresh(vals[v])
            self._layer(ctx, l, vals, boots, refresh)
            self.times[l.kind] += clock.now() - t0 - (self.times["bootstrap"] - b0)
        if self.cm.argmax:
            return self._argmax(ctx, vals[self.output], refresh)
        return vals[self.output]

    def _argmax(self, ctx, z, refresh):
        """The argmax head (argmax.py) on the logits / B."""
        sw, bits = ctx.switcher, self.cm.lut_bits
        if self._head is None:
            self._head = [LinearTransform.from_diagonals(ctx, m.diagonals(), self.slots) for m in self._head_maps()]
            self._head_bias = self._head_maps()[1].bias
        diff, wins, out = self._head
        if z.level < sw.levels + 1:
            z = refresh(z)
        s = sw.lut(diff(z), [step], grid_interval(bits), bits)[0]
        w = wins(s)
        w = ev.add_plaintext(ctx, w, self._bias(ctx, "argmax", self._head_bias, w))
        k = self.layouts[self.output].shape[0]
        h = sw.lut(w, [lambda y: (y > k - 1.5).to(torch.float64)], win_interval(bits), bits)[0]  # [wins = K - 1]
        return out(h)

    def _layer(self, ctx, l, vals, boots, refresh):
        """One layer of run(): its value into vals (its inputs already refreshed where the plan says)."""
        if l.kind == "linear":
            if l.name not in self.chains:
                return  # composed into the layer reading it
            src = self.chains[l.name][0]
            lt, bias, presum = self.transform(l.name)
            if lt is None:
                vals[l.name] = vals[src]
                return
            ct = _need(vals[src], 1, l.name)
            for k in presum:
                ct = ev.add(ctx, ct, ev.rotate(ctx, ct, k))
            ct = lt(ct)
            if bias is not None:
                ct = ev.add_plaintext(ctx, ct, self._bias(ctx, l.name, bias, ct))
            vals[l.name] = ct
        elif l.kind == "add":
            a, b = (vals[i] for i in l.inputs)
            vals[l.name] = ev.add(ctx, a, b)
        elif l.kind == "act":
            vals[l.name] = self._act(ctx, l, vals)
        elif l.kind == "max":
            vals[l.name] = self._max(ctx, l, vals)
        else:
            vals[l.name] = self._relu(ctx, l, vals, boots, refresh)

    def _bias(self, ctx, name, bias, ct):
        """The bias plaintext at ct's level and scale (encoded once: none inside a graph capture)."""
        key = (name, ct.level, ct.scale)
        pt = self._bias_pts.get(key)
        if pt is None:
            pt = self._bias_pts[key] = ctx.encode(bias.to(ctx.device), level=ct.level, scale=ct.scale, slots=ct.slots)
        return pt

    def _act(self, ctx, l, vals):
        """An "act" layer by one lookup table: fn(B_in y) / B_out on the grid of y = x / B_in (the
        direct form), or y g(B_in y) B_in / B_out with the factor g = fn / x by LUT (the product form)."""
        fn = activation_function(l, self.modules)
        b_in, b_out = self.cm.bounds[l.inputs[0]], self.cm.bounds[l.name]
        sw, bits = ctx.switcher, self.cm.lut_bits
        ct = _need(vals[l.inputs[0]], sw.levels, l.name)
        if self.cm.lut_form(l.name) == "product":
            g = factor(fn)
            f = _lut(sw, ct, lambda y: g(y * b_in), FACTOR_INTERVAL, bits, self.switch_values[l.name])
            return _times(ctx, ct, f, b_in / b_out, l.name)
        return _lut(sw, ct, lambda y: fn(y * b_in) / b_out, grid_interval(bits), bits, self.switch_values[l.name])

    def _max(self, ctx, l, vals):
        """A max pooling's tournament (maxpool.py) on x / B; the output shares B."""
        sw, bits = ctx.switcher, self.cm.lut_bits
        pairs, odd = self.max_transforms(l.name)
        form = self.cm.lut_form(l.name)
        x = _need(vals[l.inputs[0]], sw.levels + 1, l.name)
        cands = _compare(ctx, sw, bits, [d(x) for d, _ in pairs], [b(x) for _, b in pairs], form)
        cands += [odd(x)] if odd is not None else []
        while len(cands) > 1:
            wave = tournament(len(cands))[0]
            diffs = [ev.sub(ctx, cands[i], cands[j]) for i, j in wave]
            cands = _compare(ctx, sw, bits, diffs, [cands[j] for _, j in wave], form) + cands[len(wave) * 2:]
        return cands[0]

    def _relu(self, ctx, l, vals, boots, refresh):
        fn = self.cm.relu_for(l.name)
        if isinstance(fn, LUTReLU):
            sw = ctx.switcher
            bits = self.cm.lut_bits
            if self.cm.lut_form(l.name) == "product":  # x [x > 0]: the step by LUT (of sharpen(x)), x's precision kept
                stages = self.cm.lut_sharpen
                x = _need(vals[l.inputs[0]], sw.levels + SHARPEN_LEVELS * stages, l.name)
                y = x
                for _ in range(stages):
                    y = evaluate(ctx, y, SHARPEN.series)
                return _times(ctx, x, _lut(sw, y, larger, FACTOR_INTERVAL, bits, self.switch_values[l.name]))
            x = _need(vals[l.inputs[0]], sw.levels, l.name)
            return _lut(sw, x, torch.relu, grid_interval(bits), bits, self.switch_values[l.name])
        stages, times_input = relu_stages(fn)
        src = l.inputs[0]
        y = vals[src]
        for k, (series, depth) in enumerate(stages):
            if (("stage", k), "y") in boots:
                y = refresh(y)
            y = evaluate(ctx, _need(y, depth, l.name), series)
        if times_input:
            if ("product", src) in boots:
                vals[src] = refresh(vals[src])
            if ("product", "y") in boots:
                y = refresh(y)
            y = ev.mul(ctx, _need(vals[src], 1, l.name), _need(y, 1, l.name))
        return y


def _lut(sw, ct, fn, interval, bits: int, values: int):
    """fn of ct's values by one switch that converts only its first `values` slots (ct repeats
    them every `values` slots: a layout's period; the result repeats them the same way)."""
    if values >= ct.slots:
        return sw.lut(ct, [fn], interval, bits)[0]
    return sw.lut(ct.replace(slots=values), [fn], interval, bits)[0].replace(slots=ct.slots)


def _compare(ctx, sw, bits, diffs: list, bases: list, form: str = "direct") -> list:
    """[b + 2 relu((a - b) / 2)] (the direct form) or [b + (a - b) [a > b]] (the product form) for
    the differences a - b and bases b of one wave: every difference through one switch (one batch
    of ciphertexts, at the lowest of their levels)."""
    if not diffs:
        return []
    low = min(d.level for d in diffs)
    diffs = [ev.drop_level(ctx, d, d.level - low) for d in diffs]
    batch = diffs[0].replace(data=torch.stack([d.data for d in diffs]))
    product = form == "product"
    r = sw.lut(batch, [larger if product else half_relu], lut_interval(bits, form), bits)[0]
    outs = []
    for k, b in enumerate(bases):
        rk = r.replace(data=r.data[k])
        outs.append(ev.add(ctx, b, _times(ctx, diffs[k], rk) if product else ev.add(ctx, rk, rk)))
    return outs


def _times(ctx, x, f, c: float = 1.0, where: str | None = None):
    """x f c, one multiplication: a product form's value times its factor by LUT. The bound ratio
    c (an "act" layer's B_in / B_out) rides on the operand dropped to the other's level, as a
    relabelled scale (x at scale s holds c x at scale s / c; the drop lands on the nominal scale):
    no level for it. At equal levels (where = the act layer) x drops one level to carry it, as
    plan.lut_level counts."""
    if where is not None and x.level == f.level:
        x = ev.drop_level(ctx, x.replace(scale=x.scale / c), 1)
    elif x.level > f.level:
        x = ev.drop_level(ctx, x.replace(scale=x.scale / c), x.level - f.level)
    elif f.level > x.level:
        f = ev.drop_level(ctx, f.replace(scale=f.scale / c), f.level - x.level)
    return ev.mul(ctx, x, f)


def _check_keys(ctx, et, what: str):
    """ContextError unless et was encrypted under ctx's keys: evaluation keys applied to another
    key's ciphertext give noise, not an error. Contexts sharing keys (ctx.public(), ctx.to(),
    fhetorch.load) share the key id that keygen draws."""
    other = getattr(et, "ctx", None)
    if other is ctx:
        return
    if ctx.key_id is None or getattr(other, "key_id", None) != ctx.key_id:
        raise ContextError(f"{what}: the ciphertext was encrypted under other keys than this model's (another "
                           "compiled model's or context's keygen); encrypt it with this model's cm.encrypt(x), or "
                           "give both models one context: cm.keygen(context=ctx)")


def _need(ct, levels: int, where: str):
    if ct.level < levels:
        raise InternalError(f"nn: {where} needs {levels} levels, its input has {ct.level}: the plan and the "
                            "execution disagree (a bug; please report it)")
    return ct


class _Clock:
    """perf_counter, synchronising the device first when timing (no-op otherwise)."""

    def __init__(self, device, on: bool):
        self.device, self.on = device, on

    def now(self) -> float:
        if not self.on:
            return 0.0

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()


__all__ = ["Program"]

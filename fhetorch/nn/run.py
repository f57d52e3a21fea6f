"""Encrypted execution of a compiled model (compiler.py's CompiledModel).

A `Program` turns the layers into layouts and slot maps (layout.py) once; `run` walks the
layers on ciphertexts with the plan's rules (plan.py):

- linear layers stay pending (a SlotMap from a materialised value) and compose while their
  value has no other consumer; a pending value is materialised — one LinearTransform
  (fused BSGS, circuits/linear.py) plus the bias, one level — when a ReLU, an addition, a
  second consumer or the output needs it. Bound factors (compiler.py) scale the map then.
- a ReLU runs its polynomial stages on values in [-1, 1] (no constants: input and output
  share their bound), bootstrapping the intermediate between stages when a stage needs more
  levels than are left, then x * (...) for the composite form;
- an addition adds two ciphertexts (the lower level wins);
- any value about to be used with too few levels is bootstrapped first, and the refreshed
  ciphertext serves its later consumers — the same greedy rule the plan reports.

All values share one slot count n (the smallest power of two holding every layout); a
bootstrapping of n < N/2 slots is the sparse one.
"""
from __future__ import annotations

import torch

from ..circuits import bootstrap as _bts
from ..circuits.linear import LinearTransform
from ..circuits.polynomial import Composite, cost, evaluate
from ..ckks import evaluator as ev
from ..errors import LayoutError
from .graph import UnsupportedLayerError
from .layout import Layout, layer_map
from .plan import FREE


class Program:
    def __init__(self, cm):
        self.cm = cm
        layers = cm.layers
        modules = dict(cm.graph_module.named_modules())
        inp = layers[0]
        if len(inp.shape) != 3:
            raise UnsupportedLayerError("nn: encrypted models take image inputs (C, H, W) for now")
        layouts = {inp.name: Layout.image(*inp.shape)}
        maps = {}
        # slot count: the largest layout (images keep their input grid)
        span = layouts[inp.name].span
        for l in layers[1:]:
            span = max(span, l.shape[0] * (inp.shape[1] * inp.shape[2] if len(l.shape) == 3 else 1))
        n = 1 << max(0, (span - 1).bit_length())
        if n > cm.params.n // 2:
            raise UnsupportedLayerError(f"nn: the feature maps need {span} slots, more than one ciphertext's "
                                        f"{cm.params.n // 2}; multi-ciphertext layouts are not built yet")
        self.slots = n
        for l in layers[1:]:
            if l.kind == "linear":
                node = l.node
                module = modules.get(node.target) if node.op == "call_module" else None
                m, lout = layer_map(l, module, layouts[l.inputs[0]], n)
                maps[l.name] = m
                layouts[l.name] = lout
            else:
                layouts[l.name] = layouts[l.inputs[0]]
        self.layouts, self.maps = layouts, maps
        self.consumers = {}
        for l in layers:
            for i in l.inputs:
                self.consumers[i] = self.consumers.get(i, 0) + 1
        self.output = layers[-1].name
        self._lts = {}
        # keep encoded diagonals only while they are few (a ResNet's would not fit the GPU)
        self.cache_encodings = sum(len(m.diagonals()) for m in maps.values() if m is not None) <= 2000

    # --- linear transforms -----------------------------------------------------------------
    def _pending(self):
        """{value: (source value, composed SlotMap or None)} for every linear layer, as run() composes them."""
        pend, out = {}, {}
        for l in self.cm.layers[1:]:
            if l.kind != "linear":
                continue
            src = l.inputs[0]
            m = self.maps[l.name]
            if src in pend and self.consumers.get(src, 0) == 1:
                s0, m0 = pend[src]
                comp = m0 if m is None else (m if m0 is None else m0.then(m))
                pend[l.name] = (s0, comp)
            else:
                pend[l.name] = (src, m)
        return pend

    def transform(self, name: str):
        """(LinearTransform or None, scaled bias) materialising value `name` from its source."""
        if name not in self._lts:
            src, m = self._pending()[name]
            if m is None:
                self._lts[name] = (None, None)
            else:
                b = self.cm.bounds
                m = m.scaled(b[src], b[name])
                lt = LinearTransform.from_diagonals(self.cm.ctx, m.diagonals(), self.slots)
                lt.cache_encodings = self.cache_encodings
                self._lts[name] = (lt, m.bias if bool(m.bias.any()) else None)
        return self._lts[name]

    def rotations(self) -> dict:
        """{rotation step: the highest level a transform uses it at} (from the plan), so keys
        used only below the top hold only the limbs of their levels."""
        steps = {}
        plan = {s.name: s for s in self.cm.plan.steps}
        by_name = {l.name: l for l in self.cm.layers}
        for l in self.cm.layers[1:]:
            if l.kind == "linear" and self._materialised(l.name):
                lt, _ = self.transform(l.name)
                if lt is None:
                    continue
                first = l  # the chain's first layer: where the map reads its source, at that level
                while first.inputs and by_name[first.inputs[0]].kind == "linear" and \
                        not self._materialised(first.inputs[0]):
                    first = by_name[first.inputs[0]]
                level = plan[first.name].level_in
                for r in lt.rotations():
                    steps[r] = max(steps.get(r, 0), level)
        return steps

    def _materialised(self, name: str) -> bool:
        """Whether run() materialises linear value `name` (a non-linear or second consumer, or the output)."""
        if name == self.output:
            return True
        users = [l for l in self.cm.layers if name in l.inputs]
        return len(users) != 1 or users[0].kind != "linear"

    # --- client side -------------------------------------------------------------------------
    def encrypt(self, ctx, x: torch.Tensor):
        from ..tensor import EncryptedTensor

        inp = self.cm.layers[0]
        x = torch.as_tensor(x)
        if x.dim() == len(inp.shape) + 1:
            if x.shape[0] != 1:
                raise ValueError(f"CompiledModel.encrypt: one input at a time, got a batch of {x.shape[0]}")
            x = x[0]
        if tuple(x.shape) != tuple(inp.shape):
            raise ValueError(f"CompiledModel.encrypt: the model takes {tuple(inp.shape)}, got {tuple(x.shape)}")
        lay = self.layouts[inp.name]
        v = lay.pack(x.to(torch.float64) / self.cm.bounds[inp.name], self.slots)
        ct = ctx.encrypt_vector(v, slots=self.slots)
        return EncryptedTensor(ctx, ct, (self.slots,), layout=("nn", self.cm.params.name, inp.name, lay))

    def decrypt(self, ctx, ey) -> torch.Tensor:
        lay = getattr(ey, "layout", None)
        if lay is None or lay[2] != self.output or lay[3] != self.layouts[self.output]:
            raise LayoutError("CompiledModel.decrypt: not an output of this compiled model (cm(cm.encrypt(x)))")
        v = ctx.decrypt_vector(ey.ciphertext).real.to(torch.float64).cpu()
        return (self.layouts[self.output].unpack(v) * self.cm.bounds[self.output]).reshape(1, -1)

    # --- the forward pass ----------------------------------------------------------------------
    def run(self, ctx, ex, progress: bool = False, timing: bool = False):
        """The forward pass. timing: synchronise around every layer and keep seconds per kind
        ("linear", "relu", "add", "bootstrap") in self.times (for the benchmark's breakdown)."""
        from ..tensor import EncryptedTensor

        lay = getattr(ex, "layout", None)
        first = self.cm.layers[0].name
        if lay is None or lay[2] != first or lay[1] != self.cm.params.name or lay[3] != self.layouts[first]:
            raise LayoutError("CompiledModel: the input must come from cm.encrypt(x) of this compiled model")
        bt = _bts.bootstrapper(ctx) if self.cm.plan.bootstraps else None
        vals = {first: ex.ciphertext}
        self.bootstraps = 0
        self.times = {"linear": 0.0, "relu": 0.0, "add": 0.0, "bootstrap": 0.0}
        clock = _Clock(ctx.device, timing)

        def refresh(ct):
            if bt is None:
                raise RuntimeError("nn: a bootstrap is needed but the plan has none (the level model disagrees)")
            self.bootstraps += 1
            t = clock.now()
            out = bt.bootstrap(ct)
            self.times["bootstrap"] += clock.now() - t
            return out

        def ready(name, need):
            ct = vals[name]
            if ct.level < need:
                ct = vals[name] = refresh(ct)
            return ct

        pend = self._pending()
        layers = self.cm.layers[1:]
        if progress:
            from tqdm import tqdm

            layers = tqdm(layers, desc="encrypted layers", unit="layer", leave=False)
        for l in layers:
            t0, b0 = clock.now(), self.times["bootstrap"]
            self._layer(ctx, l, vals, pend, ready, refresh)
            self.times[l.kind] += clock.now() - t0 - (self.times["bootstrap"] - b0)
        return EncryptedTensor(ctx, vals[self.output], (self.slots,),
                               layout=("nn", self.cm.params.name, self.output, self.layouts[self.output]))

    def _layer(self, ctx, l, vals, pend, ready, refresh):
        """One layer of run(): its value into vals (bootstrapping inputs through ready/refresh)."""
        if l.kind == "linear":
            if not self._materialised(l.name):
                return
            src, _ = pend[l.name]
            lt, bias = self.transform(l.name)
            if lt is None:
                vals[l.name] = vals[src]
                return
            ct = lt(ready(src, 1))
            if bias is not None:
                ct = ev.add_plain(ctx, ct, bias.to(ctx.device))
            vals[l.name] = ct
        elif l.kind == "add":
            a, b = (vals[i] for i in l.inputs)
            vals[l.name] = ev.add(ctx, a, b)
        else:
            vals[l.name] = self._relu(ctx, l.inputs[0], vals, ready, refresh)

    def _relu(self, ctx, src, vals, ready, refresh):
        fn = self.cm.relu_fn
        series = fn._series() if isinstance(fn, Composite) else [fn.series]
        x = ready(src, cost(series[0]).depth)
        y = x
        for s in series:
            if y.level < cost(s).depth:
                y = refresh(y)
            y = evaluate(ctx, y, s)
        if isinstance(fn, Composite) and fn.times_input:
            if y.level < 1:
                y = refresh(y)
            x = vals[src]
            y = ev.multiply(ctx, x, y)
        return y


class _Clock:
    """perf_counter, synchronising the device first when timing (no-op otherwise)."""

    def __init__(self, device, on: bool):
        self.device, self.on = device, on

    def now(self) -> float:
        if not self.on:
            return 0.0
        import time

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()


__all__ = ["Program", "FREE"]

"""CUDA-graph replay of functions of ciphertexts.

A deep circuit (a bootstrapping, an encrypted network) issues thousands of small kernels; on
the GPU their launches cost more than some of the kernels. `Graphs` runs a function once
eagerly (its encodings, keys and constants are built and cached outside any capture), captures
a second run in a CUDA graph on static copies of its inputs, and afterwards replays the graph
after copying new inputs in. One graph per (name, level and scale of every input); eager off
CUDA. The function must not synchronise with the host (no .item(), no data-dependent Python
branches) after its warm-up: everything it does must be the same for every input.
"""
from __future__ import annotations

import gc

import torch


class Graphs:
    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self._graphs = {}

    def __call__(self, name: str, fn, *cts):
        """fn(*cts) (ciphertexts in, a ciphertext or a tuple of them out), replayed from a graph."""
        if not self.enabled or cts[0].data.device.type != "cuda":
            return fn(*cts)
        key = (name,) + tuple((c.level, c.scale) for c in cts)
        entry = self._graphs.get(key)
        if entry is None:
            static = [c.replace(data=c.data.clone()) for c in cts]
            fn(*static)  # warm-up: encodings and constants are cached outside the capture
            torch.cuda.synchronize(cts[0].data.device)
            # the capture's private pool cannot reuse cached blocks, and an allocation that fails
            # inside a capture frees memory by synchronising, which invalidates it: collect
            # cyclic garbage (earlier models, graphs) and return the cache to the driver first
            gc.collect()
            torch.cuda.empty_cache()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = fn(*static)
            entry = self._graphs[key] = (graph, static, out)
        graph, static, out = entry
        for st, c in zip(static, cts):
            st.data.copy_(c.data)
        graph.replay()
        outs = out if isinstance(out, tuple) else (out,)
        outs = tuple(o.replace(data=o.data.clone()) for o in outs)
        return outs if isinstance(out, tuple) else outs[0]

    def clear(self):
        self._graphs.clear()


__all__ = ["Graphs"]

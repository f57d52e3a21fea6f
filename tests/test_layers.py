"""The layering contract of docs/architecture.md: each implementation module imports only
lower layers (the facade modules re-export and are exempt)."""
import ast
import pathlib

import pytest

PKG = pathlib.Path(__file__).resolve().parent.parent / "fhetorch"
RANK = {"errors": 0, "_ops": 0, "ring": 1, "rlwe": 2, "ckks": 3, "tfhe": 3, "circuits": 4, "tensor": 5, "nn": 6,
        "compiler": 6}
FACADES = {"__init__.py", "serialization.py", "demo.py", "ckks/__init__.py", "ckks/polynomial.py"}


def _layer(parts):
    return parts[0] if parts else None


def _imports(path: pathlib.Path):
    tree = ast.parse(path.read_text())
    rel = path.relative_to(PKG).parts[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                base = list(rel[: len(rel) - node.level + 1])
                mod = base + (node.module.split(".") if node.module else [])
                names = [mod + [a.name] for a in node.names] if not node.module else [mod]
                yield from names
            elif node.module and node.module.startswith("fhetorch."):
                yield node.module.split(".")[1:]
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("fhetorch."):
                    yield a.name.split(".")[1:]


MODULES = sorted(p for p in PKG.rglob("*.py") if str(p.relative_to(PKG)) not in FACADES)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_imports_only_lower_layers(path):
    own = path.relative_to(PKG).parts
    own_layer = own[0] if len(own) > 1 else own[0].removesuffix(".py")
    for target in _imports(path):
        layer = _layer(target)
        if layer in (None, own_layer) or layer not in RANK:
            continue
        assert RANK[layer] <= RANK.get(own_layer, 99) and not (RANK[layer] == RANK.get(own_layer) and layer != own_layer), \
            f"{'/'.join(own)} imports fhetorch.{'.'.join(target)}: layer {layer} is not below {own_layer}"


def test_ckks_and_tfhe_never_import_each_other():
    for path in (PKG / "ckks").rglob("*.py"):
        assert all(_layer(t) != "tfhe" for t in _imports(path)), path

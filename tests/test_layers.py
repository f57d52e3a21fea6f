"""The layering contract of docs/architecture.md, with no exemptions.

Each module imports only modules of its own layer or of lower layers; the facades
(fhetorch/__init__.py, fhetorch/ckks/) are the top layer and only re-export. No fhetorch
module imports inside a function (a lazy import hides a layering cycle). `import fhetorch`
leaves the compiler (fhetorch.nn, torch.fx's optimisation passes) unloaded until first use.
"""
import ast
import pathlib
import subprocess
import sys

import pytest

PKG = pathlib.Path(__file__).resolve().parent.parent / "fhetorch"
# serialization: fhetorch/serialization.py, fhe.save / fhe.load routing to tensor (CKKS) and _tfhe
RANK = {"errors": 0, "_C": 0, "_ops": 1, "_distributed": 1, "_ring": 2, "_rlwe": 3, "_ckks": 4, "_tfhe": 4, "circuits": 5, "tensor": 6,
        "nn": 7, "serialization": 7, "ckks": 8, "tfhe": 8, "distributed": 8, "__init__": 9}


def _layer_of(path: pathlib.Path) -> str:
    parts = path.relative_to(PKG).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def _imports(path: pathlib.Path):
    """(line, target parts under fhetorch, inside a function?) of every fhetorch import."""
    tree = ast.parse(path.read_text())
    rel = path.relative_to(PKG).parts[:-1]
    nested = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for n in ast.walk(f) if n is not f}
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                base = list(rel[: len(rel) - node.level + 1])
                mod = base + (node.module.split(".") if node.module else [])
                targets = [mod + [a.name] for a in node.names] if not node.module else [mod]
            elif node.module and (node.module == "fhetorch" or node.module.startswith("fhetorch.")):
                targets = [node.module.split(".")[1:]]
        elif isinstance(node, ast.Import):
            targets = [a.name.split(".")[1:] for a in node.names if a.name.startswith("fhetorch")]
        for t in targets:
            yield node.lineno, t, id(node) in nested


MODULES = sorted(PKG.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_imports_only_lower_layers(path):
    own = _layer_of(path)
    assert own in RANK, f"{path.relative_to(PKG)}: layer {own!r} is not in the layering table (tests/test_layers.py)"
    for line, target, _ in _imports(path):
        layer = target[0] if target else "__init__"
        if layer == own:
            continue
        assert layer in RANK, f"{path.relative_to(PKG)}:{line} imports fhetorch.{'.'.join(target)}: unknown layer"
        assert RANK[layer] < RANK[own], \
            f"{path.relative_to(PKG)}:{line} imports fhetorch.{'.'.join(target)}: layer {layer} is not below {own}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_imports_inside_functions(path):
    for line, target, nested in _imports(path):
        assert not nested, f"{path.relative_to(PKG)}:{line} imports fhetorch.{'.'.join(target)} inside a function"


def test_ckks_and_tfhe_never_import_each_other():
    for a, b in (("_ckks", "_tfhe"), ("_tfhe", "_ckks")):
        for path in (PKG / a).rglob("*.py"):
            assert all(t[:1] != [b] for _, t, _ in _imports(path)), path


def test_import_leaves_the_compiler_unloaded():
    code = ("import sys, torch; before = set(sys.modules); import fhetorch; "
            "new = [m for m in sys.modules if m not in before]; "
            "assert not [m for m in new if m.startswith(('fhetorch.nn', 'torch.fx'))], new; "
            "import fhetorch as fhe; fhe.nn.compile; assert 'fhetorch.nn' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=PKG.parent)


def test_public_surface():
    import fhetorch as fhe

    assert {"Context", "EncryptedTensor", "save", "load", "ckks", "nn", "FHEError"} <= set(fhe.__all__)
    assert not {"ring", "rlwe", "_ops", "_ring", "_rlwe"} & set(fhe.__all__)
    assert fhe.ckks.Context is fhe.Context
    assert callable(fhe.ckks.polynomial.chebyshev) and callable(fhe.ckks.bootstrap)

"""kfs._native: one compiled module whose parts have owners (kfs/_native/__init__.py says why).

Each layer's Python reaches the C only through its own facade (kfs._native.record for kfs/record/, ...),
the stub _speedups.pyi mypy checks every call against names what the module has, and the module keeps
what init() hands it in its module state (PEP 489), not in C globals: a second module object made from
the same shared object has its own.
"""

from __future__ import annotations

import ast
import gc
import importlib.util
import re
from pathlib import Path

import pytest

import kfs._native
from kfs.record.types import CorruptBatchError, Record

ROOT = Path(__file__).resolve().parent.parent
KFS = ROOT / "kfs"
CSRC = KFS / "_native" / "csrc"
LAYERS = sorted(p.name for p in CSRC.iterdir() if p.is_dir())  # record, storage, views, cli, fuse, ...
needs_c = pytest.mark.skipif(not kfs._native.BUILT, reason="extension not built")


def _native_imports(path: Path) -> set[str]:
    """The kfs._native modules a file imports (`from kfs._native import views` is kfs._native.views)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("kfs._native"))
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.module.startswith("kfs._native"):
            if node.module == "kfs._native":
                found.update(f"kfs._native.{a.name}" for a in node.names)
            else:
                found.add(node.module)
    return found


def test_each_layer_imports_only_its_own_facade() -> None:
    """kfs/views/*.py may import kfs._native.views and nothing else of kfs._native; a package with no C
    (spark, groups, ...) imports none of it; only kfs/_native/ loads _speedups itself."""
    wrong = []
    seen: dict[str, set[str]] = {}
    for path in sorted(KFS.rglob("*.py")):
        parts = path.relative_to(KFS).parts
        if parts[0] == "_native":
            continue
        allowed = {f"kfs._native.{parts[0]}"} if parts[0] in LAYERS else set()
        got = _native_imports(path)
        seen.setdefault(parts[0], set()).update(got)
        if got - allowed:
            wrong.append(f"{path.relative_to(ROOT)}: {sorted(got - allowed)}")
    assert not wrong, wrong
    assert all(seen.get(layer) for layer in ("record", "storage", "views", "cli", "fuse")), seen  # (it saw them)


def test_each_c_file_lives_in_a_layer_whose_facade_exists() -> None:
    """csrc/ holds module.c and native.h, and otherwise one directory per layer: a package of kfs, with
    its facade in kfs/_native/."""
    assert {p.name for p in CSRC.iterdir() if p.is_file()} == {"module.c", "native.h"}
    assert {"record", "storage", "views", "cli", "fuse"} <= set(LAYERS)
    for layer in LAYERS:
        assert (KFS / layer / "__init__.py").is_file(), layer
        assert (KFS / "_native" / f"{layer}.py").is_file(), layer


def _stub_parameters() -> dict[str, list[str]]:
    """Each function of _speedups.pyi and its parameter names (an overloaded function's first)."""
    tree = ast.parse((KFS / "_native" / "_speedups.pyi").read_text())
    out: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name not in out:
            a = node.args
            out[node.name] = [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    return out


@needs_c
def test_the_stub_names_every_entry_point_with_its_parameters() -> None:
    """Every function of the module is in the stub, with the parameters its docstring's signature line
    names (the same names PyArg_ParseTupleAndKeywords takes as keywords), and the stub has nothing more."""
    module = kfs._native.extension
    compiled = {name for name in dir(module) if not name.startswith("_") and callable(getattr(module, name))}
    stub = _stub_parameters()
    assert compiled == set(stub)
    for name in sorted(compiled):
        doc = getattr(module, name).__doc__
        match = re.match(rf"{name}\((.*?)\)", " ".join(doc.split()))
        assert match is not None, (name, doc)
        named = [p.split("=")[0].strip() for p in match.group(1).split(",") if p.strip()]
        assert named == stub[name], (name, named, stub[name])


@needs_c
def test_the_stubs_positional_only_functions_refuse_keywords() -> None:
    """What the stub marks positional-only (`/`), the module parses with PyArg_ParseTuple: a keyword is
    a TypeError there, so a caller mypy let through with keywords would fail at run time."""
    tree = ast.parse((KFS / "_native" / "_speedups.pyi").read_text())
    positional = {node.name: node.args.posonlyargs[0].arg for node in tree.body
                  if isinstance(node, ast.FunctionDef) and node.args.posonlyargs}
    assert {"crc32c", "gather", "index_slot", "find_v2_batch", "v2_record_at"} <= set(positional)
    for name, first in positional.items():
        with pytest.raises(TypeError):
            getattr(kfs._native.extension, name)(**{first: b""})


def _second_module() -> object:
    """A new module object from the same shared object (multi-phase initialization makes one per call)."""
    spec = importlib.util.find_spec("kfs._native._speedups")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@needs_c
def test_a_second_module_object_has_its_own_state() -> None:
    """The Record class and the error live in each module object's state: a second one made from the
    same .so is not initialised by kfs's init() of the first (a single-phase module shares its C
    globals, and would be), is initialised by its own, and goes away cleanly."""
    first = kfs._native.extension
    second = _second_module()
    assert second is not first
    with pytest.raises(RuntimeError, match="init"):
        second.decode_v2_records(b"", 0, 0, 0, "CreateTime", 0)  # type: ignore[attr-defined]
    assert first.decode_v2_records(b"", 0, 0, 0, "CreateTime", 0) == []

    class Other(CorruptBatchError):
        pass

    second.init(Record, Other)  # type: ignore[attr-defined]
    with pytest.raises(Other):
        second.decode_v2_records(b"\x00", 1, 0, 0, "CreateTime", 0)  # type: ignore[attr-defined]
    with pytest.raises(CorruptBatchError) as raised:
        first.decode_v2_records(b"\x00", 1, 0, 0, "CreateTime", 0)
    assert type(raised.value) is CorruptBatchError  # the first module's error, not the second's
    del second
    gc.collect()
    assert first.decode_v2_records(b"", 0, 0, 0, "CreateTime", 0) == []

"""The wheel holds what a user runs and nothing else: the kfs package (its compiled module and that
module's stub included), no benchmarks, no soak, no tests, no jar. Built from this checkout with pip, its
file list checked. Built without a C compiler, it still builds, installs and runs, on the Python paths."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import run_kfs

ROOT = Path(__file__).resolve().parent.parent
IGNORED = shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", "*.so", ".hypothesis", ".pytest_cache",
                                 ".ruff_cache", ".mypy_cache", "mountpoints")
LOGDIR = str(ROOT / "tests" / "fixtures" / "kafka-written" / "logdirs" / "broker-a")


def _wheel(tmp_path: Path, env: dict[str, str] | None = None) -> Path:
    """A wheel of this checkout (a copy of it, without build products), built by pip."""
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=IGNORED)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=900,
                          env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return next((tmp_path / "dist").glob("kfs-*.whl"))


@pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("cc") is None, reason="needs a C compiler")
def test_the_wheel_holds_the_package_only(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    print(f"{wheel.name}: {len(names)} files")
    tops = {name.split("/")[0] for name in names}
    assert tops == {"kfs", next(t for t in tops if t.endswith(".dist-info"))}, tops
    assert any(name.startswith("kfs/_native/_speedups") and name.endswith(".so") for name in names)
    assert "kfs/_native/_speedups.pyi" in names  # (mypy checks a user's calls too)
    assert not [n for n in names if "bench" in n or "soak" in n or n.endswith(".jar") or "/tests/" in n]
    assert not [n for n in names if n.endswith((".c", ".h"))]  # (the sources are the sdist's, not the wheel's)


def test_without_a_c_compiler_the_wheel_installs_and_runs_on_the_python_paths(tmp_path: Path) -> None:
    """pyproject.toml marks the extension optional: with no working compiler (CC=false) pip still builds a
    wheel, without the module, and kfs runs from it with every facade None and the same output."""
    wheel = _wheel(tmp_path, {**os.environ, "CC": "false"})
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.endswith(".so")], names
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
                           str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("KFS_PURE_PYTHON", None)
    probe = ("import kfs, kfs._native as n\n"
             "from kfs._native import cli, fuse, record, storage, views\n"
             "facades = [getattr(m, f) for m in (cli, fuse, record, storage, views) for f in dir(m)\n"
             "           if not f.startswith('_') and f not in ('BUILT', 'extension', 'annotations')]\n"
             "print(kfs.__file__, n.BUILT, len(facades), set(facades))")
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env,
                           cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    path, built, count, values = shown.stdout.split(maxsplit=3)
    assert (path, built, values.strip()) == (str(site / "kfs" / "__init__.py"), "False", "{None}")
    assert int(count) >= 14  # (every entry point of the five facades)
    for args in (["cat", LOGDIR, "orders-0"], ["cat", "-f", "%o %k %s\n", LOGDIR, "orders-0"],
                 ["dump", "--deep-iteration", "--print-data-log", "--files",
                  str(Path(LOGDIR) / "orders-0" / "00000000000000000000.log")]):
        pure = subprocess.run([sys.executable, "-m", "kfs.cli.main", *args], capture_output=True, timeout=120,
                              env=env, cwd=tmp_path)
        compiled = run_kfs(*args)
        assert (pure.returncode, pure.stdout) == (compiled.returncode, compiled.stdout), args
        assert pure.stdout, args

"""The wheel holds what a user runs and nothing else: the kfs package (its compiled decoder included),
no benchmarks, no soak, no tests, no jar. Built from this checkout with pip, its file list checked."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("cc") is None, reason="needs a C compiler")
def test_the_wheel_holds_the_package_only(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", "*.so",
                                                                 ".hypothesis", ".pytest_cache", ".ruff_cache",
                                                                 ".mypy_cache", "mountpoints"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    wheel = next((tmp_path / "dist").glob("kfs-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    print(f"{wheel.name}: {len(names)} files")
    tops = {name.split("/")[0] for name in names}
    assert tops == {"kfs", next(t for t in tops if t.endswith(".dist-info"))}, tops
    assert any(name.startswith("kfs/_native/_speedups") and name.endswith(".so") for name in names)
    assert not [n for n in names if "bench" in n or "soak" in n or n.endswith(".jar") or "/tests/" in n]

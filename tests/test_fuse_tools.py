"""Real shell tools on every view, decoded ones included, with sizes known and with sizes unknown.

The second mount (`size_budget=0`) is what a huge partition looks like: a decoded view's size is
not computed on stat, st_size is 0 and the file is direct_io; the tools must still give the right
bytes. Expected bytes: the view read in one sequential pass, which test_fuse_tree checks against
Kafka's golden records.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import GOLDEN, GOLDEN_PARTITIONS, read_jsonl
from mounts import mounted, needs_fuse

from kfs.fuse.operations import ATTR_TIMEOUT

pytestmark = needs_fuse


@pytest.fixture(scope="module", params=["exact-sizes", "unknown-sizes"])
def mnt(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    options = {} if request.param == "exact-sizes" else {"size_budget": "0"}
    with mounted(tmp_path_factory.mktemp(request.param), **options) as mountpoint:
        yield mountpoint


def _views(partition: str) -> list[str]:
    records = read_jsonl(GOLDEN / partition / "records.jsonl")
    middle = records[len(records) // 2]
    return ["messages.jsonl", f"offset/{middle['offset']}.jsonl", f"time/{middle['timestamp']}.jsonl",
            f"offset/{middle['offset']}", "info.json", f"offset/{middle['offset']}.value"]


CASES = [(p, v) for p in GOLDEN_PARTITIONS for v in _views(p)]


def sh(*args: str, stdin: bytes | None = None) -> bytes:
    done = subprocess.run(list(args), input=stdin, capture_output=True, timeout=60)
    assert done.returncode == 0 and not done.stderr, (args, done.returncode, done.stderr)
    return done.stdout


@pytest.fixture(scope="module")
def expected(mnt: Path) -> dict[tuple[str, str], bytes]:
    cache: dict[tuple[str, str], bytes] = {}
    for partition, view in CASES:
        with open(mnt / partition / view, "rb") as f:
            cache[partition, view] = f.read()
    return cache


def _lines(data: bytes) -> list[bytes]:
    """Lines as the tools see them: split on b"\\n" only (raw views are binary)."""
    pieces = data.split(b"\n")
    lines = [piece + b"\n" for piece in pieces[:-1]]
    return [*lines, pieces[-1]] if pieces[-1] else lines


@pytest.mark.parametrize(("partition", "view"), CASES)
def test_shell_tools_read_the_right_bytes(mnt: Path, expected: dict, partition: str, view: str,
                                          tmp_path: Path) -> None:
    path = str(mnt / partition / view)
    data = expected[partition, view]
    lines = _lines(data)
    assert sh("cat", path) == data
    assert sh("head", "-n", "5", path) == b"".join(lines[:5])
    assert sh("tail", "-n", "7", path) == b"".join(lines[-7:])
    assert sh("tail", "-c", "100", path) == data[-100:]
    assert sh("wc", "-l", path).split()[0] == str(data.count(b"\n")).encode()
    assert sh("wc", "-c", path).split()[0] == str(len(data)).encode()
    assert sh("grep", "-a", "-c", "", path).strip() == str(len(lines)).encode()
    assert sh("dd", f"if={path}", "bs=100", "skip=3", "status=none") == data[300:]
    assert sh("dd", f"if={path}", "bs=64", "skip=5", "count=2", "status=none") == data[320:448]
    if view.endswith((".jsonl", ".json")):  # (less asks before showing binary files)
        assert sh("less", "-FX", path) == data  # not a terminal: less copies the file
    if mnt.parent.name.startswith("exact-sizes"):  # sendfile stops at the kernel's st_size (0 if unknown)
        shutil.copy(path, tmp_path / "copy")
        assert (tmp_path / "copy").read_bytes() == data
    assert sh("cp", path, str(tmp_path / "copy2")) == b""
    assert (tmp_path / "copy2").read_bytes() == data
    if view.endswith(".jsonl"):
        assert sh("jq", "-c", ".offset", path).split() == [str(json.loads(x)["offset"]).encode() for x in lines]
        assert sh("grep", "-c", '"offset": ', path).strip() == str(len(lines)).encode()
    if view == "info.json":
        assert json.loads(sh("jq", ".", path)) == json.loads(data)


def test_unknown_size_becomes_exact_once_read(tmp_path: Path) -> None:
    with mounted(tmp_path, size_budget="0") as mnt:
        path = mnt / "orders-0" / "messages.jsonl"
        assert os.stat(path).st_size == 0  # not known yet, and not computed by a stat
        data = path.read_bytes()
        assert len(data) > 0
        time.sleep(ATTR_TIMEOUT + 0.2)  # the kernel keeps the last stat for the attr timeout
        assert os.stat(path).st_size == len(data)  # the read mapped the whole stream


def test_less_in_a_terminal_pages_to_the_end(tmp_path: Path) -> None:
    if not shutil.which("tmux"):
        pytest.skip("needs tmux")
    with mounted(tmp_path, size_budget="0") as mnt:
        path = mnt / "audit.events-v2-3" / "messages.jsonl"
        last = json.loads(path.read_bytes().splitlines()[-1])["offset"]
        session = f"kfs-less-{os.getpid()}"
        subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "400", "-y", "20",
                        f"less -S {path}"], check=True)
        try:
            time.sleep(0.5)
            subprocess.run(["tmux", "send-keys", "-t", session, "G"], check=True)
            screen = b""
            for _ in range(50):
                time.sleep(0.1)
                screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", session],
                                        capture_output=True, check=True).stdout
                if f'"offset": {last},'.encode() in screen:
                    break
            assert f'"offset": {last},'.encode() in screen
        finally:
            subprocess.run(["tmux", "kill-session", "-t", session], check=False)

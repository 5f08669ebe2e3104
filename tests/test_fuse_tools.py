"""Real shell tools on every view, decoded ones included: every size is exact from the first stat.

Two mounts: one with the background size scan, and one without it and without a size cache
(`size_scan=no,size_cache=none`), where the first stat of a decoded view counts its lines itself.
Expected bytes: the view read in one sequential pass, which test_fuse_tree checks against Kafka's
golden records.
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

pytestmark = needs_fuse


ON_DEMAND = {"size_scan": "no", "size_cache": "none"}


@pytest.fixture(scope="module", params=["scanned", "on-demand"])
def mnt(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    options = {} if request.param == "scanned" else ON_DEMAND
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
    shutil.copy(path, tmp_path / "copy")  # sendfile: trusts st_size
    assert (tmp_path / "copy").read_bytes() == data
    assert os.stat(path).st_size == len(data)
    assert sh("cp", path, str(tmp_path / "copy2")) == b""
    assert (tmp_path / "copy2").read_bytes() == data
    if view.endswith(".jsonl"):
        assert sh("jq", "-c", ".offset", path).split() == [str(json.loads(x)["offset"]).encode() for x in lines]
        assert sh("grep", "-c", '"offset": ', path).strip() == str(len(lines)).encode()
    if view == "info.json":
        assert json.loads(sh("jq", ".", path)) == json.loads(data)


def test_the_first_stat_of_a_fresh_mount_is_exact(tmp_path: Path) -> None:
    with mounted(tmp_path, **ON_DEMAND) as mnt:
        path = mnt / "orders-0" / "messages.jsonl"
        size = os.stat(path).st_size  # the first request this mount answers about the file
        assert size == len(path.read_bytes()) > 0


def test_verbose_logs_every_request_and_a_quiet_mount_none(tmp_path: Path) -> None:
    for name, options in (("loud", {"verbose": True}), ("quiet", {})):
        with mounted(tmp_path, name=name, **options) as mnt:
            size = os.stat(mnt / "orders-0" / "messages.jsonl").st_size
            (mnt / "orders-0" / "info.json").read_bytes()
        logged = (tmp_path / f"{name}.log").read_text()
        requests = [line for line in logged.splitlines() if "kfs.requests" in line]
        if name == "loud":
            assert f"getattr /orders-0/messages.jsonl -> size {size} (" in logged
            assert any("open /orders-0/info.json -> ok" in line for line in requests)
            assert any("read" in line and "/orders-0/info.json" in line for line in requests)
        else:
            assert requests == []


def test_less_in_a_terminal_pages_to_the_end(tmp_path: Path) -> None:
    if not shutil.which("tmux"):
        pytest.skip("needs tmux")
    with mounted(tmp_path, **ON_DEMAND) as mnt:
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

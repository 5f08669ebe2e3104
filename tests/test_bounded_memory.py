"""The daemon's memory is bounded: every cache is an LRU bounded in entries (and bytes where values
vary), and a real daemon stays under 150 MB after `grep -r` over many partitions and after reading
many distinct `offset/N.value` files (benchmarks/bench_memory.py measures the full 5,000 / 100,000)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from log_writers import build_logdir, memory
from mounts import needs_fuse

import kfs.fuse.tree as tree_module
import kfs.storage.logdir as logdir_module
from kfs.fuse.tree import KfsTree
from kfs.storage import LogDirs
from kfs.storage.lru import LruCache


def test_an_lru_cache_is_bounded_in_entries_and_bytes() -> None:
    cache: LruCache[int, bytes] = LruCache(3, max_bytes=10, weigh=len)
    for key in range(5):
        cache.put(key, b"ab")
    assert len(cache) == 3 and cache.get(0) is None and cache.get(4) == b"ab"
    cache.get(2)  # used: kept over 3
    cache.put(5, b"abcdefgh")  # 8 bytes: 2 + 8 <= 10 leaves room for one more value only
    assert cache.bytes <= 10 and cache.get(5) == b"abcdefgh" and cache.get(2) == b"ab" and cache.get(3) is None
    cache.put(6, bytes(11))  # larger than the whole cache: not kept
    assert cache.get(6) is None and cache.bytes <= 10


def test_the_trees_caches_stay_within_their_bounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(tree_module, "MAX_SMALL_FILES", 40)
    monkeypatch.setattr(tree_module, "MAX_SIGNATURES", 50)
    monkeypatch.setattr(tree_module, "MAX_DECODED_LOGS", 5)
    monkeypatch.setattr(logdir_module, "MAX_PARTITION_LOGS", 8)
    logdir, _ = build_logdir(tmp_path, 30, 300)
    tree = KfsTree(LogDirs([str(logdir)]))
    for n in range(300):
        handle = tree.open(f"/bench-0/offset/{n}.value")
        assert handle.read(1 << 20, 0)
    for name in tree.logdirs.partition_names():
        tree.getattr(f"/{name}/info.json")
        tree.open(f"/{name}/messages.jsonl").read(4096, 0)
    assert len(tree._small) <= 40 and tree._small.bytes <= tree_module.MAX_SMALL_BYTES
    assert len(tree._signatures) <= 50
    assert len(tree._decoded) <= 5
    assert len(tree.logdirs._partitions) <= 8
    # evicted partitions come back on demand, answering the same
    assert tree.open("/bench-0/offset/7.value").read(1 << 20, 0) == tree.open("/bench-0/offset/7.value").read(
        1 << 20, 0)


@needs_fuse
def test_the_daemons_rss_after_a_wide_grep_and_many_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kfs.fuse.mount import mount, unmount

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    logdir, _ = build_logdir(tmp_path, 600, 3000)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    pid = mount([str(logdir)], str(mnt), {"log": str(tmp_path / "daemon.log")})
    assert pid is not None
    try:
        done = subprocess.run(["grep", "-r", "-c", "refund", str(mnt)], capture_output=True, timeout=600)
        assert len(done.stdout.splitlines()) == 2 * 601  # messages.jsonl and info.json of each partition
        after_grep = memory(pid)["VmRSS"]
        for n in range(3000):
            with open(mnt / "bench-0" / "offset" / f"{n}.value", "rb") as f:
                assert f.read()
        after_values = memory(pid)["VmRSS"]
    finally:
        unmount(str(mnt))
    print(f"daemon RSS: {after_grep / 1024:.1f} MiB after grep -r over 601 partitions, "
          f"{after_values / 1024:.1f} MiB after 3000 distinct values")
    assert after_grep < 150 * 1024 and after_values < 150 * 1024
    assert os.path.exists(tmp_path / "daemon.log")

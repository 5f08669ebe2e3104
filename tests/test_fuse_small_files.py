"""Small rendered files (`.value`, info.json) opened, read and released in C (kfs/fuse/fast_small.py).

Through a real mount: every value of a Kafka-written partition reads as Kafka's record holds it, read
whole or from any offset, and the daemon says the C path answered them; a write open is still EROFS
(from Python); `-o direct_io` works the same; a value too big for the C path and a `kfs mount -v`
mount are answered in Python, with the same bytes."""

from __future__ import annotations

import errno
import json
import os
import re
import time
from pathlib import Path

import pytest
from builders import golden_rows
from conftest import v2_batch, write_segment
from mounts import mounted, needs_fuse

from kfs.fuse import fast_small

pytestmark = [needs_fuse, pytest.mark.skipif(not fast_small.available(), reason="no compiled extension or libfuse3")]

ANSWERED = re.compile(r"small files answered in C: (\d+) opens, (\d+) reads")


def _answered_in_c(log_path: Path) -> tuple[int, int] | None:
    for _ in range(50):  # the daemon writes it as it stops
        found = ANSWERED.findall(log_path.read_text(errors="replace")) if log_path.exists() else []
        if found:
            return int(found[-1][0]), int(found[-1][1])
        time.sleep(0.1)
    return None


@pytest.mark.parametrize("direct_io", [False, True])
def test_values_and_info_json_are_answered_in_c(tmp_path: Path, direct_io: bool) -> None:
    rows = golden_rows("orders-0")
    options = {"direct_io": True} if direct_io else {}
    with mounted(tmp_path, **options) as mnt:
        for row in rows:
            path = mnt / "orders-0" / "offset" / f"{row[2]}.value"
            want = row[6] or b""
            assert path.read_bytes() == want, row[2]
            assert os.stat(path).st_size == len(want)
            if len(want) > 10:  # a read from inside the file, as `tail -c` or `dd skip=` make
                fd = os.open(path, os.O_RDONLY)
                try:
                    assert os.pread(fd, 7, 3) == want[3:10]
                    assert os.pread(fd, 100, len(want)) == b""
                finally:
                    os.close(fd)
        info = json.loads((mnt / "orders-0" / "info.json").read_bytes())
        assert info["topic"] == "orders" and info["partition"] == 0
    counted = _answered_in_c(tmp_path / "mnt.log")
    assert counted is not None
    opens, reads = counted
    assert opens >= len(rows) and reads >= len(rows), counted


def test_a_write_open_is_refused(tmp_path: Path) -> None:
    with mounted(tmp_path) as mnt:
        path = mnt / "orders-0" / "offset" / "5.value"
        assert path.read_bytes()  # rendered: the next open would be C's, if it took writes
        for flags in (os.O_WRONLY, os.O_RDWR, os.O_RDONLY | os.O_TRUNC, os.O_WRONLY | os.O_APPEND):
            with pytest.raises(OSError) as caught:
                os.open(path, flags)
            assert caught.value.errno == errno.EROFS, flags


def test_a_large_value_and_a_verbose_mount_are_answered_in_python(tmp_path: Path) -> None:
    logdir = tmp_path / "logdir"
    (logdir / "big.values-0").mkdir(parents=True)
    values = [bytes(range(256)) * 80, b"small"]  # 20 KiB: past the C path's 16 KiB
    records = [(i, 1_700_000_000_000 + i, b"k", v, []) for i, v in enumerate(values)]
    write_segment(str(logdir / "big.values-0"), 0, [[(v2_batch(0, records), records)]], closed=False)
    with mounted(tmp_path, [str(logdir)]) as mnt:
        assert (mnt / "big.values-0" / "offset" / "0.value").read_bytes() == values[0]
    assert _answered_in_c(tmp_path / "mnt.log") == (0, 0)
    with mounted(tmp_path, [str(logdir)], name="verbose", verbose=True) as mnt:
        assert (mnt / "big.values-0" / "offset" / "1.value").read_bytes() == values[1]
    text = (tmp_path / "verbose.log").read_text()
    assert "open /big.values-0/offset/1.value" in text and not ANSWERED.search(text)


def test_only_the_mount_with_the_c_path_puts_files_in_its_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """One process, two mounts (two trees served with `serve` in threads, say): libfuse's table is
    patched once, for the first; the second's files must never enter the C table, where an open of
    the same name through the first mount would find them."""
    from kfs._native import fuse as native_fuse

    put: list[str] = []
    monkeypatch.setattr(native_fuse, "small_files_put", lambda path, data, rendered: put.append(path))
    first, second = object(), object()
    monkeypatch.setattr(fast_small, "_owner", [first])
    fast_small.keep(second, "/orders-0/offset/5.value", b"theirs", 1.0)
    fast_small.keep(first, "/orders-0/offset/5.value", b"ours", 1.0)
    assert put == ["/orders-0/offset/5.value"]
    monkeypatch.setattr(fast_small, "_owner", [None])  # no mount has it (-v, or after unmounting)
    fast_small.keep(first, "/orders-0/offset/6.value", b"ours", 1.0)
    assert len(put) == 1

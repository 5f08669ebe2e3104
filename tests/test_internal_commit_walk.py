"""`kfs cat` of `__consumer_offsets`: the compiled walker renders runs of offset-commit batches itself
(walk_v2_run's `commits`, kfs/_native/csrc/views/render_v2_jsonl.c commit_line), and each batch holding
anything else (group metadata, a null key, a damaged key or value, a transaction marker) stays the
Python walk's, whose lines the line decoder and render_jsonl's `commits` give
(tests/test_internal_commit_lines.py holds those two together).

Over random partitions written as a broker writes them (tests/offsets_log.PartitionWriter: several
segments, with or without index entries, transactional batches and their markers), every start offset
kind and both isolation levels: the bytes with the walker are the bytes without it, and the walker took
batches. The Kafka-written fixtures' lines are held to the golden answers by tests/test_internal_golden.py,
through `kfs cat` itself."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from conftest import run_kfs
from mounts import mounted, needs_fuse
from offsets_log import PartitionWriter, offset_commit_key, offset_commit_value
from test_spark_internal_columns import row

from kfs.internal_topics.lines import line_decoder
from kfs.storage import LogDirs
from kfs.views import plain_runs
from kfs.views.batch_lines import joined_lines
from kfs.views.jsonl import commits_in_c, line_prefix, render_line_list, render_lines
from kfs.views.line_lengths import counted_batches

pytestmark = pytest.mark.skipif(not plain_runs.available(), reason="the compiled extension is not built")

def cat(logdir: str, partition: str) -> bytes:
    done = run_kfs("cat", logdir, partition)
    assert done.returncode == 0, done.stderr
    return done.stdout


MARKER = (b"\0\0\0\1", b"\0\0\0\0\0\0")  # an end-transaction marker: COMMIT, coordinator epoch 0


def plain_commit(rnd: random.Random) -> tuple[bytes, bytes | None]:
    """An offset commit as a broker writes it (key version 1, value version 1 or 3), or its tombstone."""
    key = offset_commit_key(f"group-{rnd.randint(0, 9)}", f"topic-{rnd.randint(0, 3)}", rnd.randint(0, 11))
    if rnd.random() < 0.1:
        return key, None
    return key, offset_commit_value(rnd.randint(0, 10**9), rnd.choice(["", "meta"]), 1_735_689_600_000,
                                    leader_epoch=rnd.choice([-1, 0, 5]), version=rnd.choice([1, 3]))


def write_partition(rnd: random.Random, logdir: Path) -> None:
    (logdir / "meta.properties").write_text("version=0\nbroker.id=1\n")
    writer = PartitionWriter(str(logdir), 0, segment_bytes=rnd.choice([2_000, 20_000, 1 << 20]),
                             index_interval=rnd.choice([None, 4096, 300]))
    ts = 1_735_689_600_000
    for _ in range(rnd.randint(1, 60)):
        ts += rnd.randint(0, 50)
        kind = rnd.random()
        if kind < 0.55:  # offset commits alone: the walker's
            rows = [(ts, *plain_commit(rnd)) for _ in range(rnd.randint(1, 25))]
        else:
            rows = [(ts, *row(rnd)) for _ in range(rnd.randint(1, 25))]
        if rnd.random() < 0.1:  # a transactional commit and its marker
            writer.append(rows, producer_id=7, producer_epoch=0, transactional=True)
            writer.append([(ts, *MARKER)], producer_id=7, producer_epoch=0, transactional=True, control=True)
        else:
            writer.append(rows)
        if rnd.random() < 0.05:
            writer.skip(rnd.randint(1, 5))  # (compaction's gap)
    writer.close()


def lines(logdir: Path, start: int, isolation: str, walker: bool, taken: list[int]) -> bytes:
    plog = LogDirs([str(logdir)]).partition("__consumer_offsets-0")
    decoder = line_decoder("__consumer_offsets")
    assert commits_in_c(decoder)
    prefix = line_prefix("__consumer_offsets", 0)
    take = None
    if walker:
        inner = plain_runs.line_taker(prefix, None, isolation == "read_committed",
                                      decoded=plain_runs.WalkerDecoding(commits=True))

        def take(*args):  # type: ignore[no-untyped-def]
            got = inner(*args)
            if got is not None:
                taken.append(got.size)
            return got

    return b"".join(joined_lines(plog, start, isolation=isolation, control="hide", prefix=prefix,
                                 render=lambda records: render_lines(prefix, records, decoder), fused=False,
                                 take=take))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_the_walkers_lines_are_the_python_walks(tmp_path_factory: pytest.TempPathFactory, rnd: random.Random) -> None:
    logdir = tmp_path_factory.mktemp("offsets")
    write_partition(rnd, logdir)
    taken: list[int] = []
    plog = LogDirs([str(logdir)]).partition("__consumer_offsets-0")
    end = plog.log_end_offset()
    for start in {plog.log_start_offset(), rnd.randint(0, max(end, 1)), end}:
        for isolation in ("read_uncommitted", "read_committed"):
            assert lines(logdir, start, isolation, True, taken) == lines(logdir, start, isolation, False, [])


def test_the_walker_takes_commit_batches_and_leaves_group_metadata(tmp_path: Path) -> None:
    """Commit-only batches go through the walker; a batch with one group metadata record does not, and
    its lines are still every record's."""
    rnd = random.Random(34)
    writer = PartitionWriter(str(tmp_path), 0)
    (tmp_path / "meta.properties").write_text("version=0\nbroker.id=1\n")
    for _ in range(20):
        writer.append([(5, *plain_commit(rnd)) for _ in range(10)])
    writer.append([(6, *plain_commit(rnd)), (6, b"\0\2\0\1g", b"\0\3garbage")])
    writer.close()
    taken: list[int] = []
    with_walker = lines(tmp_path, 0, "read_uncommitted", True, taken)
    assert with_walker == lines(tmp_path, 0, "read_uncommitted", False, [])
    assert len(with_walker.splitlines()) == 202 and sum(taken) > 0
    assert b'"decode_error": "protocolType: length 26465 runs past the end"' in with_walker.splitlines()[-1]


def counts(logdir: Path, start: int, end: int, isolation: str, walker: bool) -> list[tuple[int, int, int, int]]:
    """The decoded view's per-batch line counts (first offset, next offset, bytes, records)."""
    plog = LogDirs([str(logdir)]).partition("__consumer_offsets-0")
    decoder = line_decoder("__consumer_offsets")
    prefix = line_prefix("__consumer_offsets", 0)
    got = counted_batches(plog, start, end, isolation=isolation, control="hide", prefix=prefix,
                          render=lambda records: render_line_list(prefix, records, decoder), countable=False,
                          decoded=plain_runs.WalkerDecoding(commits=True) if walker else None)
    return [(c.first_offset, c.next_offset, c.length, c.records) for c in got]


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False))
def test_the_walkers_counts_are_the_lines_lengths(tmp_path_factory: pytest.TempPathFactory,
                                                  rnd: random.Random) -> None:
    """What the mount sizes `messages.jsonl` by: the walker's counts of commit batches add up, batch run by
    batch run, to the lines the Python walk renders, over any range."""
    logdir = tmp_path_factory.mktemp("offsets")
    write_partition(rnd, logdir)
    plog = LogDirs([str(logdir)]).partition("__consumer_offsets-0")
    end = plog.log_end_offset()
    for start, stop in ((plog.log_start_offset(), end), (rnd.randint(0, max(end, 1)), rnd.randint(0, end + 1))):
        for isolation in ("read_uncommitted", "read_committed"):
            with_walker = counts(logdir, start, stop, isolation, True)
            rendered = lines(logdir, start, isolation, False, [])
            shown = [x for x in rendered.splitlines(keepends=True) if json.loads(x)["offset"] < stop]
            assert sum(c[2] for c in with_walker) == sum(map(len, shown)), (start, stop, isolation)
            assert sum(c[3] for c in with_walker) == len(shown)
            assert sum(c[2] for c in counts(logdir, start, stop, isolation, False)) == sum(map(len, shown))


@needs_fuse
def test_a_mount_sizes_and_serves_the_walkers_lines(tmp_path: Path) -> None:
    """Through a real mount: `messages.jsonl` of a partition of commit batches and group metadata is
    `kfs cat`'s bytes, its size their length, and `tail` of it the last lines."""
    rnd = random.Random(2634)
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    write_partition(rnd, logdir)
    want = cat(str(logdir), "__consumer_offsets-0")
    assert want.count(b"\n") > 50
    with mounted(tmp_path, [str(logdir)], name="commits") as mnt:
        path = mnt / "__consumer_offsets-0" / "messages.jsonl"
        assert os.stat(path).st_size == len(want)
        assert path.read_bytes() == want
        tail = subprocess.run(["tail", "-n", "3", str(path)], capture_output=True, check=True).stdout
        assert tail == b"".join(want.splitlines(keepends=True)[-3:])

"""The compiled loops one by one (kfs/_native/csrc/): nanoseconds of CPU a record, best of --rounds.

    python -m benchmarks.bench_native [--mib 4] [--rounds 15] [--case NAME]

The records are tests/log_writers.build_chunk's (kafka-python's builder: 20-record batches, ~130-byte
JSON values, a header on every third record), uncompressed and, for the lz4 case, lz4. Each case calls
one entry point of kfs._native the way kfs does: per batch (render_v2_jsonl, count_jsonl,
render_v2_dump, decode_v2_records) or per window of batches (walk_v2_run, with the mount's 256 KiB
budget). CPU time (time.process_time), so a shared machine's other work counts less; what code
placement alone moves (a few %, up to 17% for kcat -J before the build aligned its loops) is in
docs/performance.md, "The C extension's layout".
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from log_writers import build_chunk

from kfs._native import cli, record, views
from kfs.record import parse_batch_header
from kfs.record.default_batch import records_payload
from kfs.record.types import BatchHeader
from kfs.views.jsonl import line_prefix
from kfs.views.kcat_format import KcatFormat, KcatJson

NO_END = (1 << 63) - 1
BUDGET = 256 * 1024  # plain_runs.RENDER_BUDGET


def _batches(chunk: bytes, positions: list[int]) -> list[tuple[BatchHeader, bytes]]:
    out = []
    for start, end in zip(positions, [*positions[1:], len(chunk)], strict=True):
        header = parse_batch_header(chunk[start:end], 0, start)
        out.append((header, records_payload(chunk[start:end], header)))
    return out


def cases(mib: int) -> tuple[dict[str, Callable[[], object]], int]:
    """Each case's one pass over the data, and how many records a pass covers."""
    chunk, positions, records = build_chunk(["none"], mib << 20, seed=3)
    lz4_chunk, _, _ = build_chunk(["lz4"], mib << 20, seed=3)
    batches = _batches(chunk, positions)
    prefix = line_prefix("bench", 0)
    render, count, dump, decode, walk = (views.render_v2_jsonl, views.count_jsonl, cli.render_v2_dump,
                                         record.decode_v2_records, views.walk_v2_run)
    if render is None or count is None or dump is None or decode is None or walk is None:
        sys.exit("bench_native needs the compiled extension (pip install -e . with a C compiler)")

    def per_batch(lines: bool) -> None:
        for h, payload in batches:
            render(payload, h.record_count, h.base_offset, h.first_timestamp, h.timestamp_type, h.max_timestamp,
                   prefix, 0, NO_END, lines)

    def counted() -> None:
        for h, payload in batches:
            count(payload, h.record_count, h.base_offset, h.first_timestamp, h.timestamp_type, h.max_timestamp,
                  prefix, 0, NO_END)

    def dumped() -> None:
        for h, payload in batches:
            dump(payload, h.record_count, h.base_offset, h.first_timestamp, h.timestamp_type, h.max_timestamp,
                 h.base_sequence, -1, None, 0, h.compression)

    def decoded() -> None:
        for h, payload in batches:
            decode(payload, h.record_count, h.base_offset, h.first_timestamp, h.timestamp_type, h.max_timestamp)

    def walked(window: bytes, count_only: bool = False, kcat: bytes | None = None) -> Callable[[], object]:
        def run() -> None:
            view, at, previous = memoryview(window), 0, None
            while at < len(window):
                got = walk(view[at:], 0, previous, NO_END, 0, NO_END, "" if kcat else prefix, False, count_only,
                           BUDGET, kcat=kcat, null=b"")
                assert got is not None, at
                at, previous = at + got[0], got[2]
        return run

    return {
        "render_v2_jsonl": lambda: per_batch(False),
        "render_v2_jsonl lines": lambda: per_batch(True),
        "count_jsonl": counted,
        "render_v2_dump": dumped,
        "decode_v2_records": decoded,
        "walk_v2_run render": walked(chunk),
        "walk_v2_run count": walked(chunk, count_only=True),
        "walk_v2_run kcat -f": walked(chunk, kcat=KcatFormat("%o %k %h %s\n", "bench", 0).program()),
        "walk_v2_run kcat -J": walked(chunk, kcat=KcatJson("bench", 0, 1).program()),
        "walk_v2_run lz4 render": walked(lz4_chunk),
    }, records


def best(run: Callable[[], object], rounds: int) -> float:
    """The least CPU time of `rounds` passes."""
    times = []
    for _ in range(rounds):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--mib", type=int, default=4, help="MiB of batches (default 4)")
    parser.add_argument("--rounds", type=int, default=15, help="passes per case; the best is shown (default 15)")
    parser.add_argument("--case", action="append", help="only this case (repeatable)")
    args = parser.parse_args(argv)
    table, records = cases(args.mib)
    print(f"bench_native: {records:,} records, {args.mib} MiB, best of {args.rounds}, CPU ns a record")
    for name, run in table.items():
        if args.case and name not in args.case:
            continue
        print(f"  {name:24s} {best(run, args.rounds) / records * 1e9:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

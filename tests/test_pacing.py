"""The background size scan gives way to readers (kfs.views.pacing), and never starves a size.

A scan that counts while the mount serves decoded reads pauses between batches; a foreground
size that needs the very run the scan holds is answered at once (the scan finishes the run for
it), and every size is the rendered length (the oracle, tests/test_decoded_sizes.py).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from builders import make_log, partition_log
from test_decoded_sizes import rendered

from kfs.views.decoded import DecodedLog
from kfs.views.pacing import Foreground
from kfs.views.size_cache import SizeCache


def test_scan_pauses_while_busy_and_yields_the_run_a_foreground_size_needs(tmp_path: Path) -> None:
    directory, _ = make_log(tmp_path, segments=3)
    plog = partition_log(directory)
    expected = len(rendered(plog, plog.log_start_offset(), "read_uncommitted", "hide"))
    decoded_log = DecodedLog(plog, cache=SizeCache(None))
    foreground, stop, reading = Foreground(), threading.Event(), threading.Event()
    reading.set()

    def reader() -> None:  # a reader being served: the mount stays busy
        while reading.is_set():
            foreground.touch()
            time.sleep(0.01)

    scan_sizes: list[int] = []
    threading.Thread(target=reader, daemon=True).start()
    time.sleep(0.05)
    scan = threading.Thread(target=lambda: scan_sizes.append(
        decoded_log.view(None).size(lambda run: foreground.give_way(run, stop))), daemon=True)
    scan.start()
    time.sleep(0.5)
    assert scan.is_alive(), "the scan went on counting while the mount was serving reads"
    assert not scan_sizes

    asked: list[int] = []  # a foreground size waits for no reader: the scan finishes the run for it
    foreground_size = threading.Thread(target=lambda: asked.append(decoded_log.view(None).size()), daemon=True)
    foreground_size.start()
    foreground_size.join(5)
    assert asked == [expected], "a foreground size waited for the paused scan"

    reading.clear()  # the mount goes idle: the scan ends
    scan.join(5)
    assert not scan.is_alive()
    assert scan_sizes == [expected]
    assert foreground.paused_seconds >= 0.4


def test_scan_stops_pausing_when_told_to_stop(tmp_path: Path) -> None:
    directory, _ = make_log(tmp_path, segments=1)
    plog = partition_log(directory)
    foreground, stop = Foreground(), threading.Event()
    foreground.touch()
    run = DecodedLog(plog).view(None).layout()[0][0]
    stop.set()
    began = time.monotonic()
    foreground.give_way(run, stop)
    assert time.monotonic() - began < 0.2
    assert not Foreground().busy()


def test_scan_pauses_while_a_long_foreground_computation_is_under_way(tmp_path: Path) -> None:
    """`ls MOUNTPOINT/.groups` on a fresh mount replays `__consumer_offsets` in one long call, no reads
    between: `working()` keeps the mount busy all along, so the scan waits, then goes on."""
    directory, _ = make_log(tmp_path, segments=3)
    plog = partition_log(directory)
    expected = len(rendered(plog, plog.log_start_offset(), "read_uncommitted", "hide"))
    decoded_log = DecodedLog(plog, cache=SizeCache(None))
    foreground, stop, done = Foreground(), threading.Event(), threading.Event()
    scan_sizes: list[int] = []
    with foreground.working():
        assert foreground.busy()
        scan = threading.Thread(target=lambda: scan_sizes.append(
            decoded_log.view(None).size(lambda run: foreground.give_way(run, stop))), daemon=True)
        scan.start()
        done.wait(0.6)  # longer than IDLE_AFTER: no touch() keeps it busy, the hold does
        assert scan.is_alive() and not scan_sizes, "the scan counted during the foreground computation"
    assert foreground.holding == 0
    scan.join(5)
    assert scan_sizes == [expected]
    assert foreground.paused_seconds >= 0.5

"""The mount's background size scan: every partition's decoded sizes, mapped once after mounting.

ratarmount builds its index when it mounts; kfs mounts at once (lazily) and maps the decoded
views' runs in one background thread, partition by partition, so that by the time a user runs
`tail -n 1`, `less +G` or `rsync`, the sizes and seek maps are there. A stat that needs a size
the scan has not reached maps it on demand (and the scan then finds it done); closed segments
come from the size cache when a mount has seen them before. Progress goes to the daemon log.
The scan gives way to readers: it pauses while the mount serves decoded reads (kfs.views.pacing).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from kfs.storage import KfsError

if TYPE_CHECKING:
    from kfs.fuse.tree import KfsTree
    from kfs.views.runs import SegmentRun

log = logging.getLogger("kfs")

REPORT_EVERY = 5.0  # seconds between the scan's progress lines


def scan_sizes(tree: KfsTree, stop: threading.Event) -> None:
    """Map `messages.jsonl` of every partition (every run of every view), until done or `stop`;
    pausing while the mount serves decoded reads (kfs.views.pacing)."""
    began = last_report = time.monotonic()

    def pace(run: SegmentRun) -> None:
        tree.foreground.give_way(run, stop)

    done = 0
    for decoded_log in tree.decoded_logs():
        if stop.is_set():
            return
        plog = decoded_log.plog
        try:
            decoded_log.view(plog.log_start_offset()).size(pace)
        except (KfsError, OSError) as e:
            if stop.is_set():
                return  # unmounting: the files are being closed under the scan
            log.warning("size scan: %s: %s", plog.name, e)
        except Exception:
            if stop.is_set():
                return
            log.exception("size scan: %s", plog.name)
        done += 1
        now = time.monotonic()
        if now - last_report >= REPORT_EVERY:
            last_report = now
            log.info("size scan: %d partitions mapped (%.1f s)", done, now - began)
    cache = tree.cache
    cache.flush(60)  # the maps the scan made, kept by the cache's writer thread
    cache.prune()
    log.info("size scan: the decoded sizes of %d partitions are known (%.1f s, %.1f s of it paused for reads; size "
             "cache %s: %d segment maps found, %d computed and kept)", done, time.monotonic() - began,
             tree.foreground.paused_seconds, cache.directory or "off", cache.hits, cache.stores)


def start_size_scan(tree: KfsTree) -> threading.Event:
    """Start the scan in a daemon thread; set the returned event to stop it."""
    stop = threading.Event()
    threading.Thread(target=scan_sizes, args=(tree, stop), name="kfs-size-scan", daemon=True).start()
    return stop

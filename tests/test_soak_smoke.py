"""The live-writer soak's smoke mode (`python -m kfs.bench.soak --minutes 0.5`): a writer appending,
rolling, deleting (retention) and swapping (cleaner) segments while `tail -f`, `cat`, lookups and
`grep -r` read through one mount; the soak's checks must hold. The soak itself runs minutes
(README, Soak); this is its half-minute form."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mounts import needs_fuse

pytestmark = needs_fuse

# Checks the soak still fails, with why; each must go when the bug is fixed (the run prints its verdict).
KNOWN_OPEN = {
    "0 wrong bytes in whole-partition reads (tail -f messages.jsonl, grep -r)":
        "issue 9: under cleaner swaps, decoded runs are counted and rendered through the partition's current "
        "segment listing, not the run's own segment file: lines cut and records skipped (README, Soak)",
    "no unexpected reader errors":
        "issue 9: while a cleaner swap leaves no <base>.log (renamed to .deleted, .swap not yet renamed), "
        "offset/<N>.value and .jsonl in that segment answer ENOENT (README, Soak)",
    "tail -f caught up":
        "issue 9: tail -f messages.jsonl may end the run behind the log end; cause not yet known (tail's "
        "'file truncated' rule against a file whose start moves is the suspect)",
}


def test_the_soak_smoke_run_holds_its_checks(tmp_path: Path) -> None:
    report_path = tmp_path / "soak.json"
    done = subprocess.run([sys.executable, "-m", "kfs.bench.soak", "--minutes", "0.5", "--clean-every", "5",
                           "--json", str(report_path)], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "TMPDIR": str(tmp_path)})
    assert report_path.exists(), done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(report_path.read_text())
    failed = [check for check, ok in report["verdict"].items() if not ok and check not in KNOWN_OPEN]
    assert failed == [], done.stdout[-4000:]
    writer = report["writer"]
    assert writer["roll"] >= 5 and writer["delete"] >= 1 and writer["clean"] >= 1  # it did what it says
    assert sum(r["bytes"] for r in report["readers"].values()) > 10 << 20

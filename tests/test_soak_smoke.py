"""The live-writer soak's smoke mode (`python -m soak.soak (from tests/) --minutes 0.5`): a writer appending,
rolling, deleting (retention) and swapping (cleaner) segments while `tail -f`, `cat`, lookups and
`grep -r` read through one mount; every one of the soak's checks must hold.

Opt-in (`KFS_SOAK=1 python -m pytest tests/test_soak_smoke.py`, about 40 s): 21 of 22 runs here
passed (up to three at a time), one failed uncaptured: not part of every test run until it has a record.
The defects the soak found each have a short regression test of their own
(tests/test_mount_live_segments.py, tests/test_live_swaps.py, tests/test_fuse_decoded.py). README,
"Soak", has the 10-minute run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mounts import needs_fuse

pytestmark = [needs_fuse, pytest.mark.skipif(os.environ.get("KFS_SOAK") != "1",
                                             reason="the soak is opt-in: KFS_SOAK=1")]


def test_the_soak_smoke_run_holds_its_checks(tmp_path: Path) -> None:
    report_path = tmp_path / "soak.json"
    done = subprocess.run([sys.executable, "-m", "soak.soak", "--minutes", "0.5", "--clean-every", "5",
                           "--json", str(report_path)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TMPDIR": str(tmp_path)}, cwd=Path(__file__).parent)
    assert report_path.exists(), done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(report_path.read_text())
    failed = [check for check, ok in report["verdict"].items() if not ok]
    assert failed == [], done.stdout[-4000:]
    assert done.returncode == 0
    writer = report["writer"]
    assert writer["roll"] >= 5 and writer["delete"] >= 1 and writer["clean"] >= 1  # it did what it says
    assert sum(r["bytes"] for r in report["readers"].values()) > 10 << 20

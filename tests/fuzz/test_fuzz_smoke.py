"""The fuzzing campaign's smoke run (a few thousand inputs, every target, both paths) as a test.

The full campaign (>= 10^6 inputs, the C path under ASan/UBSan) is `tests/fuzz/fuzz_campaign.py`;
README.md gives its command and figures. The seed is fixed per run and printed: a finding is
replayed with `python tests/fuzz/fuzz_campaign.py --replay SEED:I --mix ...`.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import fuzz_campaign
import fuzz_targets

SEED = int(os.environ.get("KFS_FUZZ_SEED", "20261123"))
PLAN = (("record=1", 3000), ("index=1", 120), ("partition=1", 80), ("cache=1", 40), ("entries=1", 60),
        ("markers=1", 30), ("kcat=1", 40), ("payloads=1", 40))


def test_a_smoke_run_finds_nothing(tmp_path: Path) -> None:
    print(f"fuzz smoke seed {SEED} (KFS_FUZZ_SEED to change), C path {'on' if fuzz_targets.has_compiled() else 'off'}")
    started = time.monotonic()
    findings = []
    with fuzz_campaign.kfs_logging_silenced():
        for mix, n in PLAN:
            runner = fuzz_campaign.Runner(tmp_path, fuzz_campaign.parse_mix(mix))
            for i in range(n):
                _, kind, detail = runner.run(SEED, i)
                if kind is not None:
                    findings.append(f"{mix} {SEED}:{i} {kind}: {detail}")
    assert logging.getLogger("kfs").propagate, "the smoke run left kfs's logger silenced"
    print(f"{sum(n for _, n in PLAN)} inputs in {time.monotonic() - started:.1f} s")
    assert not findings, "\n".join(findings[:10])

"""The internal-topics fixtures hold together without Kafka's Java classes: kafka-python reads every batch
of every segment and KRaft snapshot (CRCs checked), each golden line matches the bytes it describes (offset,
timestamp, control type, null key/value, the leading int16 = golden version, the metadata frame's apiKey
and version), every index entry names a batch that is there, and groups.jsonl is replayed again from
records.jsonl. This guards the golden answers other tests trust (tests/fixtures/internal-topics/README.md).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
_spec = importlib.util.spec_from_file_location("verify", FIXTURES / "internal-topics" / "generator" / "verify.py")
assert _spec is not None and _spec.loader is not None
verify = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(verify)


def test_the_internal_topics_fixture_agrees_with_its_bytes() -> None:
    records, groups = verify.check(FIXTURES / "internal-topics")
    assert records > 200 and groups > 500


def test_the_undecodable_fixture_agrees_with_its_bytes() -> None:
    records, _ = verify.check(FIXTURES / "internal-topics-undecodable")
    assert records == 17


def test_a_golden_version_that_is_not_on_disk_is_caught(tmp_path: Path) -> None:
    copy = tmp_path / "internal-topics"
    shutil.copytree(FIXTURES / "internal-topics", copy)
    golden = copy / "golden" / "__transaction_state-0" / "records.jsonl"
    lines = [json.loads(x) for x in golden.read_text().splitlines()]
    lines[0]["value"]["version"] += 1
    golden.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(AssertionError, match="__transaction_state-0@0"):
        verify.check(copy)

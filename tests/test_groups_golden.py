"""`kfs groups` against Kafka: the `__consumer_offsets` written by Kafka's own record classes and the
brute-force replay of its generator (tests/fixtures/internal-topics, README there).

`golden/groups.jsonl` holds, for every record timestamp T of the log (and one instant before the
first, and the log end as `"at": null`), the replay's answer: committed offsets, and the state of
classic groups from their GroupMetadataValue. `kfs groups --at T --json` must give exactly those
lines at every T, through the command line and through a real mount. The generator's replay does
not model KIP-848 groups; for those, the members and epoch kfs shows are checked against what
Kafka's converters print for the group's records (golden/__consumer_offsets-*/records.jsonl).
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from conftest import run_kfs
from mounts import mounted, needs_fuse

FIXTURE = Path(__file__).parent / "fixtures" / "internal-topics"
LOGDIR = FIXTURE / "logdirs" / "broker-a"
GOLDEN = FIXTURE / "golden"
OFFSET_KEYS = ("group", "topic", "partition", "offset", "leader_epoch", "metadata", "commit_timestamp", "log_offset")
STATE_KEYS = ("group", "state", "generation", "protocol_type", "protocol", "leader")

pytestmark = pytest.mark.skipif(not (GOLDEN / "groups.jsonl").exists(), reason="no internal-topics fixture")


def golden_records() -> list[dict[str, Any]]:
    records = []
    for path in sorted(GOLDEN.glob("__consumer_offsets-*/records.jsonl")):
        partition = int(path.parent.name.rsplit("-", 1)[1])
        for line in path.read_text().splitlines():
            records.append({**json.loads(line), "partition": partition})
    return records


def instants() -> list[int | None]:
    """The generator's: every record timestamp, one before the first, and the log end."""
    stamps = sorted({r["timestamp"] for r in golden_records() if "control" not in r})
    return [stamps[0] - 1, *stamps, None]


def golden_by_instant() -> dict[int | None, list[dict[str, Any]]]:
    by_at: dict[int | None, list[dict[str, Any]]] = defaultdict(list)
    for line in (GOLDEN / "groups.jsonl").read_text().splitlines():
        obj = json.loads(line)
        by_at[obj.pop("at")].append(obj)
    return by_at


def kfs_member(m: dict[str, Any], protocol_type: str | None) -> dict[str, Any]:
    """A member of a kfs state line in the generator's shape: Kafka's field names; for the consumer
    protocol the subscribed topics and the assignment as {topic: partitions}."""
    out = {"memberId": m["member_id"], "groupInstanceId": m.get("group_instance_id"), "clientId": m["client_id"],
           "clientHost": m["client_host"], "rebalanceTimeout": m.get("rebalance_timeout", -1),
           "sessionTimeout": m["session_timeout"]}
    subscription, assignment = m["subscription"], m["assignment"]
    if protocol_type == "consumer":
        out["subscription"] = subscription["topics"]
        out["assignment"] = {a["topic"]: a["partitions"] for a in assignment["assignedPartitions"]}
    else:
        out["subscription"], out["assignment"] = subscription, assignment
    return out


def comparable(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """kfs's lines in the generator's terms; KIP-848 and share group lines are checked elsewhere."""
    out = []
    for line in lines:
        if "topic" in line:
            out.append({k: line[k] for k in OFFSET_KEYS})
        elif line["group_type"] == "classic":
            out.append({**{k: line[k] for k in STATE_KEYS},
                        "members": [kfs_member(m, line["protocol_type"]) for m in line["members"]]})
    return out


def expected(by_at: dict[int | None, list[dict[str, Any]]], at: int | None) -> list[dict[str, Any]]:
    return [{k: v for k, v in line.items() if k in OFFSET_KEYS or k in STATE_KEYS or k == "members"}
            for line in by_at.get(at, [])]


@functools.cache
def cli_json(at: int | None) -> list[dict[str, Any]]:
    """`kfs groups LOGDIR --json [--at T]` (run once per T for the module)."""
    result = run_kfs("groups", str(LOGDIR), "--json", *([] if at is None else ["--at", str(at)]))
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""  # every record decodes
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_the_fixture_covers_what_the_replay_must_handle() -> None:
    """Tombstones, a deleted group, key versions 0 and 1, a transaction, several partitions."""
    records = golden_records()
    assert any(r["value"] is None and r["key"]["type"] == "OffsetCommitKey" for r in records)
    assert any(r["value"] is None and r["key"]["type"] == "GroupMetadataKey" for r in records)
    assert {r["key"]["version"] for r in records if r["key"]["type"] == "OffsetCommitKey"} == {0, 1}
    assert any(r.get("control") == "COMMIT" for r in records)
    assert len({r["partition"] for r in records}) > 1
    assert len(golden_by_instant()) > 10


def test_cli_agrees_with_the_replay_at_every_instant() -> None:
    by_at = golden_by_instant()
    for at in instants():
        assert comparable(cli_json(at)) == expected(by_at, at), f"at {at}"


@needs_fuse
def test_mount_agrees_with_the_replay_at_every_instant(tmp_path: Path) -> None:
    by_at = golden_by_instant()
    with mounted(tmp_path, [str(LOGDIR)]) as mountpoint:
        groups = mountpoint / ".groups"
        for at in instants():
            path = groups / "all.jsonl" if at is None else groups / "all" / "at" / f"{at}.jsonl"
            lines = [json.loads(line) for line in path.read_bytes().splitlines()]
            assert comparable(lines) == expected(by_at, at), f"at {at}"
            for group in {line["group"] for line in expected(by_at, at)}:
                name = group.replace("%", "%25").replace("/", "%2F")
                one = groups / f"{name}.json" if at is None else groups / name / "at" / f"{at}.json"
                doc = json.loads(one.read_bytes())
                mine = ([doc["state"]] if doc["state"] else []) + doc["offsets"]
                assert comparable(mine) == [line for line in expected(by_at, at) if line["group"] == group]


def modern_members_from_records(at: int | None) -> dict[str, tuple[int | None, list[str]]]:
    """Per KIP-848 / share group: (group epoch, live member ids) from Kafka's decoding of the records."""
    epochs: dict[str, int | None] = {}
    members: dict[tuple[str, str], bool] = {}
    for r in sorted(golden_records(), key=lambda r: (r["partition"], r["offset"])):
        if "control" in r or (at is not None and r["timestamp"] > at):
            continue
        kind, data = r["key"]["type"], r["key"]["data"]
        if kind in ("ConsumerGroupMetadataKey", "ShareGroupMetadataKey"):
            epochs[data["groupId"]] = None if r["value"] is None else r["value"]["data"]["epoch"]
        elif kind in ("ConsumerGroupMemberMetadataKey", "ShareGroupMemberMetadataKey"):
            members[(data["groupId"], data["memberId"])] = r["value"] is not None
    out = {}
    for group, epoch in epochs.items():
        live = sorted(m for (g, m), alive in members.items() if g == group and alive)
        if epoch is not None or live:
            out[group] = (epoch, live)
    return out


def test_consumer_and_share_groups_show_their_records_epoch_and_members() -> None:
    seen_states = set()
    for at in instants():
        modern = {line["group"]: line for line in cli_json(at)
                  if "topic" not in line and line["group_type"] in ("consumer", "share")}
        expected_modern = modern_members_from_records(at)
        assert {g: (line["generation"], [m["member_id"] for m in line["members"]])
                for g, line in modern.items()} == expected_modern, f"at {at}"
        seen_states |= {line["state"] for line in modern.values()}
    assert "Stable" in seen_states

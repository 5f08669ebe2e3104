"""A schema registered on a live broker (docs/spec.md section 9, issue 24 item 6): the mount follows the
registry topic as it grows, an old record becomes decodable, and every decoded size stays exact."""

from __future__ import annotations

import json
import time
from pathlib import Path

from conftest import v2_batch, write_segment
from mounts import mounted, needs_fuse

from kfs.fuse.operations import ATTR_TIMEOUT

SCHEMA = json.dumps({"type": "record", "name": "R", "fields": [{"name": "v", "type": "int"}]})


def schema_record(offset: int, schema_id: int) -> tuple:
    key = json.dumps({"keytype": "SCHEMA", "subject": "t-value", "version": 1, "magic": 1}).encode()
    value = json.dumps({"subject": "t-value", "version": 1, "id": schema_id, "schema": SCHEMA, "deleted": False})
    return (offset, 2000 + offset, key, value.encode(), [])


def read_until(path: Path, done, timeout: float = 15.0) -> bytes:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        data = path.read_bytes()
        if done(data) or time.monotonic() > deadline:
            return data
        time.sleep(0.3)


@needs_fuse
def test_a_schema_registered_while_mounted_decodes_old_records(tmp_path: Path) -> None:
    logdir = tmp_path / "logdir"
    (logdir / "t-0").mkdir(parents=True)
    (logdir / "_schemas-0").mkdir()
    (logdir / "meta.properties").write_text("version=1\nnode.id=1\n")
    records = [(i, 1000 + i, None, b"\x00\x00\x00\x00\x05" + bytes([2 * i]), []) for i in range(3)]
    write_segment(str(logdir / "t-0"), 0, [[(v2_batch(0, records), records)]], closed=False)
    noop = [(0, 1000, b'{"keytype":"NOOP","magic":0}', None, [])]
    write_segment(str(logdir / "_schemas-0"), 0, [[(v2_batch(0, noop), noop)]], closed=False)
    with mounted(tmp_path, [str(logdir)], size_cache=str(tmp_path / "sizes")) as mnt:
        path = mnt / "t-0" / "messages.jsonl"
        before = path.read_bytes()
        assert path.stat().st_size == len(before)
        assert all(json.loads(line)["value_decode_error"] == "schema id 5: not in the schema registry"
                   for line in before.splitlines())
        assert (mnt / ".schemas" / "all.jsonl").read_bytes() == b""
        with open(logdir / "_schemas-0" / f"{0:020d}.log", "ab") as f:  # the registry appends a schema
            f.write(v2_batch(1, [schema_record(1, 5)]))
        after = read_until(path, lambda data: b"value_schema" in data)
        lines = [json.loads(line) for line in after.splitlines()]
        assert [line["value"] for line in lines] == [{"v": 0}, {"v": 1}, {"v": 2}]
        assert all(line["value_schema"] == {"id": 5, "subject": "t-value", "version": 1, "type": "AVRO"}
                   for line in lines)
        # The kernel trusts the size it was last given for its attribute timeout (a live log's rule,
        # docs/design.md): a read opened after the change gets the new lines (direct_io while the kernel
        # may hold the old size), and the next stat past that timeout asks the mount, which must answer
        # the new state's exact size. (Asked at once, a loaded machine showed the old size: 711 for 663.)
        time.sleep(ATTR_TIMEOUT + 0.3)
        assert path.stat().st_size == len(after) == len(path.read_bytes())
        assert (mnt / "t-0" / "offset" / "1.jsonl").read_bytes() == b"".join(after.splitlines(True)[1:])
        listed = [json.loads(line) for line in (mnt / ".schemas" / "all.jsonl").read_bytes().splitlines()]
        assert [(e["subject"], e["id"]) for e in listed] == [("t-value", 5)]
    # a second mount of the same data: the sizes counted under the new state, from the cache
    with mounted(tmp_path, [str(logdir)], name="again", size_cache=str(tmp_path / "sizes")) as mnt:
        path = mnt / "t-0" / "messages.jsonl"
        assert path.stat().st_size == len(after) and path.read_bytes() == after

"""Registry-framed payloads (docs/spec.md section 9) against golden answers: values and keys serialized by
Confluent's own serializers, `_schemas` records as the registry writes them
(tests/fixtures/schema-registry, see its README), decoded by `kfs cat`, the API and a real mount."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_kfs
from mounts import mounted, needs_fuse

from kfs.registry import load_registry
from kfs.storage import LogDirs
from kfs.views.decoded import DecodedLog
from kfs.views.size_cache import SizeCache

FIXTURE = Path(__file__).parent / "fixtures" / "schema-registry"
LOGDIR = str(FIXTURE / "logdir")
TOPICS = ("orders", "users", "customers", "events", "payments", "legacy", "gone", "mixed", "newer", "newer_proto")
ANSWER_KEYS = ("key", "value", "key_schema", "value_schema", "key_decode_error", "value_decode_error")


def golden(topic: str) -> list[dict]:
    return json.loads((FIXTURE / "golden" / f"{topic}.json").read_text())


def check_line(line: dict, expected: dict) -> None:
    """`line` holds what `expected` says: decoded keys and values equal (to fastavro's JSON writer and,
    for Avro, to Apache Avro's Java JsonEncoder: `*_avro_java`), errors start as expected, and no
    `*_schema` / `*_decode_error` key the answer does not have."""
    assert line["offset"] == expected["offset"]
    for name in ("key", "value"):
        if f"{name}_avro_java" in expected:
            assert line[name] == expected[f"{name}_avro_java"], (name, line[name], expected[f"{name}_avro_java"])
    for name in ANSWER_KEYS:
        if name.endswith("_decode_error"):
            if name in expected:
                assert line[name].startswith(expected[name]), (line[name], expected[name])
            else:
                assert name not in line, line
        elif name in expected:
            assert line[name] == expected[name], (name, line[name], expected[name])
        elif name.endswith("_schema"):
            assert name not in line, line


def cat_lines(*args: str) -> list[dict]:
    result = run_kfs("cat", *args)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.parametrize("topic", TOPICS)
def test_kfs_cat_decodes_every_golden_record(topic: str) -> None:
    lines = cat_lines(LOGDIR, f"{topic}-0")
    expected = golden(topic)
    assert len(lines) == len(expected)
    for line, answer in zip(lines, expected, strict=True):
        check_line(line, answer)
    # the keys of a decoded line, in order: section 3's, then the schemas, then the errors
    for line in lines:
        names = list(line)
        assert names[:8] == ["topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers"]
        tail = names[8:]
        assert tail == [n for n in ("value_schema", "key_schema", "value_decode_error", "key_decode_error")
                        if n in line]


def test_undecodable_payloads_keep_section_3_bytes() -> None:
    lines = cat_lines(LOGDIR, "mixed-0")
    raw = cat_lines(LOGDIR, "mixed-0", "--decode", "raw")
    for line, plain in zip(lines, raw, strict=True):
        if "value_decode_error" in line:
            assert line["value"] == plain["value"]
        if "key_decode_error" in line:
            assert line["key"] == plain["key"]
    assert len(lines) == len(golden("mixed"))  # nothing dropped


def test_decode_raw_turns_it_off() -> None:
    for line in cat_lines(LOGDIR, "orders-0", "--decode", "raw"):
        assert isinstance(line["value"], dict) and "base64" in line["value"]
        assert "value_schema" not in line


def test_schemas_from_other_logdirs_and_from_files(tmp_path: Path) -> None:
    """--schemas: the registry's topic in other log dirs, or a directory of <id>.avsc files."""
    data = tmp_path / "data"
    data.mkdir()
    shutil.copytree(FIXTURE / "logdir" / "orders-0", data / "orders-0")
    (data / "meta.properties").write_text("version=1\nnode.id=2\n")
    undecoded = cat_lines(str(data), "orders-0")
    assert "base64" in undecoded[0]["value"]  # no registry topic there
    from_logdir = cat_lines(str(data), "orders-0", "--schemas", LOGDIR)
    for line, answer in zip(from_logdir, golden("orders"), strict=True):
        check_line(line, answer)
    files = tmp_path / "schemas"
    files.mkdir()
    state = load_registry([LOGDIR])
    assert state is not None
    (files / "1.avsc").write_text(state.state.by_id[1].schema)
    from_files = cat_lines(str(data), "orders-0", "--schemas", str(files))
    for line, answer in zip(from_files, golden("orders"), strict=True):
        assert line["value"] == answer["value"]
        assert line["value_schema"] == {"id": 1, "subject": None, "version": None, "type": "AVRO"}


def test_bad_schemas_path_is_one_sentence(tmp_path: Path) -> None:
    result = run_kfs("cat", LOGDIR, "orders-0", "--schemas", str(tmp_path / "nowhere"))
    assert result.returncode != 0
    err = result.stderr.decode()
    assert "Traceback" not in err and err.count("\n") == 1 and "--schemas" in err


def test_plain_partitions_keep_the_compiled_path() -> None:
    """A topic without framed values costs nothing more: its decoded log has no registry decoder and
    its size cache key is the plain one; a framed partition's key holds the registry's digest."""
    dirs = LogDirs([LOGDIR])
    registry = load_registry([LOGDIR])
    plain = DecodedLog(dirs.partition("plain-0"), registry=registry)
    assert plain.decoder is None and plain.countable and plain.registry_digest is None
    framed = DecodedLog(dirs.partition("orders-0"), registry=registry)
    assert framed.decoder is not None and not framed.countable
    assert registry is not None and framed.registry_digest == registry.digest()
    segment = dirs.partition("orders-0").segments()[0]
    assert framed._cache_key(segment, 0, 3, [1])["registry"] == registry.digest()


def test_sizes_are_exact_for_framed_partitions() -> None:
    dirs = LogDirs([LOGDIR])
    registry = load_registry([LOGDIR])
    for topic in TOPICS:
        log = DecodedLog(dirs.partition(f"{topic}-0"), cache=SizeCache(None), registry=registry)
        view = log.view(None)
        result = run_kfs("cat", LOGDIR, f"{topic}-0")
        assert view.size() == len(result.stdout), topic
        cursor = view.cursor()
        assert b"".join(piece for piece in _read_all(cursor, view.size())) == result.stdout


def _read_all(cursor, size: int):  # type: ignore[no-untyped-def]
    position = 0
    while position < size:
        data = cursor.read(position, 4096)
        if not data:
            break
        yield data
        position += len(data)


def test_kfs_schemas_lists_the_rebuilt_state() -> None:
    result = run_kfs("schemas", LOGDIR, "--json")
    assert result.returncode == 0, result.stderr
    got = [json.loads(line) for line in result.stdout.splitlines()]
    expected = [json.loads(line) for line in (FIXTURE / "golden" / "schemas.jsonl").read_text().splitlines()]
    assert got == expected
    table = run_kfs("schemas", LOGDIR)
    assert table.returncode == 0
    rows = [line.split("\t") for line in table.stdout.decode().splitlines()]
    assert [(r[0], int(r[1]), int(r[2]), r[3], r[4]) for r in rows] == \
        [(e["subject"], e["version"], e["id"], e["type"], "deleted" if e["deleted"] else "live") for e in expected]


def test_kfs_schemas_without_a_registry_topic(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text("version=1\nnode.id=1\n")
    result = run_kfs("schemas", str(tmp_path))
    assert result.returncode != 0 and b"no _schemas partition" in result.stderr and b"Traceback" not in result.stderr


@needs_fuse
def test_mount_decodes_and_greps(tmp_path: Path) -> None:
    cache = tmp_path / "sizes"
    with mounted(tmp_path, [LOGDIR], size_cache=str(cache)) as mnt:
        for topic in TOPICS:
            path = mnt / f"{topic}-0" / "messages.jsonl"
            data = path.read_bytes()
            assert path.stat().st_size == len(data)
            assert data == run_kfs("cat", LOGDIR, f"{topic}-0").stdout
            for line, answer in zip(data.splitlines(), golden(topic), strict=True):
                check_line(json.loads(line), answer)
        grep = subprocess.run(["grep", "-rh", "customer_id-42", str(mnt)], capture_output=True, check=True)
        assert sorted((json.loads(line)["topic"], json.loads(line)["value"]["order_id"])
                      for line in grep.stdout.splitlines()) == [("newer", 1002), ("orders", 1002)]
        if shutil.which("jq"):
            jq = subprocess.run(["jq", "-c", "select(.value.status == \"PAID\") | .value.amount",
                                 str(mnt / "orders-0" / "messages.jsonl")], capture_output=True, check=True)
            assert jq.stdout == b"99.99\n"
        one = json.loads((mnt / "users-0" / "offset" / "1.jsonl").read_bytes().splitlines()[0])
        assert one["key"] == {"user_id": 8}
    # a second mount reads the sizes from the cache: the same bytes
    with mounted(tmp_path, [LOGDIR], name="again", size_cache=str(cache)) as mnt:
        path = mnt / "orders-0" / "messages.jsonl"
        assert path.stat().st_size == len(path.read_bytes())


@needs_fuse
def test_mount_decode_raw_and_schemas_option(tmp_path: Path) -> None:
    with mounted(tmp_path, [LOGDIR], decode="raw", size_cache="none") as mnt:
        line = json.loads((mnt / "orders-0" / "messages.jsonl").read_bytes().splitlines()[0])
        assert "base64" in line["value"] and "value_schema" not in line
    data = tmp_path / "data"
    data.mkdir()
    shutil.copytree(FIXTURE / "logdir" / "orders-0", data / "orders-0")
    (data / "meta.properties").write_text("version=1\nnode.id=2\n")
    with mounted(tmp_path, [str(data)], name="other", schemas=LOGDIR, size_cache="none") as mnt:
        lines = (mnt / "orders-0" / "messages.jsonl").read_bytes().splitlines()
        for line, answer in zip(lines, golden("orders"), strict=True):
            check_line(json.loads(line), answer)


@needs_fuse
def test_mount_schemas_tree(tmp_path: Path) -> None:
    expected = [json.loads(line) for line in (FIXTURE / "golden" / "schemas.jsonl").read_text().splitlines()]
    with mounted(tmp_path, [LOGDIR], size_cache="none") as mnt:
        tree = mnt / ".schemas"
        assert ".schemas" not in [p.name for p in mnt.iterdir()]  # looked up, not listed: grep -r reads records
        assert sorted(p.name for p in tree.iterdir()) == ["all.jsonl", "ids", "subjects"]
        assert [json.loads(line) for line in (tree / "all.jsonl").read_bytes().splitlines()] == expected
        for e in expected:
            suffix = {"AVRO": ".avsc", "JSON": ".json", "PROTOBUF": ".proto"}[e["type"]]
            subject = e["subject"].replace("%", "%25").replace("/", "%2F")  # (as .groups/ names a group)
            assert (tree / "subjects" / subject / f"{e['version']}{suffix}").read_text() == e["schema"]
            assert (tree / "ids" / f"{e['id']}{suffix}").read_text() == e["schema"]
        ids = sorted(int(p.name.split(".")[0]) for p in (tree / "ids").iterdir())
        legacy = golden("legacy")[0]["value_schema"]["id"]
        # every id, deleted schemas' too: old records use them
        assert legacy in ids and {e["id"] for e in expected} <= set(ids) and len(ids) == len(set(ids))
        assert (tree / "ids" / f"{legacy}.avsc").stat().st_size == len((tree / "ids" / f"{legacy}.avsc").read_bytes())
        assert not (tree / "ids" / "999.avsc").exists()
        assert not (tree / "subjects" / "legacy-value").exists()  # hard-deleted
        grep = subprocess.run(["grep", "-rl", "customer_id", str(mnt)], capture_output=True)
        found = sorted(Path(p).parent.name for p in grep.stdout.decode().split())
        # (the registry topic's own lines hold its schemas' texts)
        assert found == ["_schemas-0", "mixed-0", "newer-0", "orders-0", "payments-0"]


def test_spark_grep_decodes_framed_values() -> None:
    pytest.importorskip("pyspark")
    result = run_kfs("spark", "grep", "customer_id-42", LOGDIR)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    by_topic = {line["topic"]: line for line in lines}
    check_line(by_topic["orders"], golden("orders")[1])


@needs_fuse
def test_the_decoded_value_alone(tmp_path: Path) -> None:
    """`offset/<N>.json` beside `offset/<N>.value`: the value as its JSON line shows it (decoded)."""
    with mounted(tmp_path, [LOGDIR], size_cache="none") as mnt:
        for topic in ("orders", "payments", "events", "users"):
            for answer in golden(topic):
                path = mnt / f"{topic}-0" / "offset" / f"{answer['offset']}.json"
                data = path.read_bytes()
                assert path.stat().st_size == len(data) and data.endswith(b"\n") and data.count(b"\n") == 1
                assert json.loads(data) == answer["value"]
        raw = (mnt / "orders-0" / "offset" / "0.value").read_bytes()  # the .value stays the stored bytes
        assert raw == run_kfs("cat", LOGDIR, "orders-0", "--format", "value").stdout and raw[:1] == b"\x00"
        assert json.loads((mnt / "plain-0" / "offset" / "2.json").read_bytes()) == '{"n": 2}'
        assert json.loads((mnt / "mixed-0" / "time" / "1732000001000.json").read_bytes()) == {"base64": "AAAAA+cCYWJj"}


@needs_fuse
def test_decoded_files_no_more_readable_than_the_schemas(tmp_path: Path) -> None:
    """A file decoded with the registry's schemas holds their field names: it grants no more than the
    registry topic's segments do (issue 28's rule); a topic not decoded with them is not narrowed."""
    logdir = tmp_path / "logdir"
    shutil.copytree(LOGDIR, logdir)
    for path in logdir.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    for segment in (logdir / "_schemas-0").iterdir():
        segment.chmod(0o600)
    with mounted(tmp_path, [str(logdir)], size_cache="none") as mnt:
        assert (mnt / "orders-0" / "messages.jsonl").stat().st_mode & 0o077 == 0
        assert (mnt / "orders-0" / "offset" / "0.json").stat().st_mode & 0o077 == 0
        assert (mnt / "orders-0" / "offset" / "0.value").stat().st_mode & 0o044 == 0o044  # the stored bytes
        assert (mnt / "plain-0" / "messages.jsonl").stat().st_mode & 0o044 == 0o044
        assert (mnt / ".schemas" / "all.jsonl").stat().st_mode & 0o077 == 0


@needs_fuse
def test_kfs_mount_schemas_argument(tmp_path: Path) -> None:
    """`kfs mount --schemas PATH` as a user types it; a wrong PATH is one sentence, nothing mounted."""
    data = tmp_path / "data"
    data.mkdir()
    shutil.copytree(FIXTURE / "logdir" / "orders-0", data / "orders-0")
    (data / "meta.properties").write_text("version=1\nnode.id=2\n")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    wrong = run_kfs("mount", "--schemas", str(tmp_path / "nowhere"), str(data), str(mnt))
    assert wrong.returncode != 0 and b"--schemas" in wrong.stderr and b"Traceback" not in wrong.stderr
    result = run_kfs("mount", "--schemas", LOGDIR, "-o", f"size_cache=none,log={tmp_path / 'mnt.log'}",
                     str(data), str(mnt))
    assert result.returncode == 0, result.stderr
    try:
        lines = (mnt / "orders-0" / "messages.jsonl").read_bytes().splitlines()
        for line, answer in zip(lines, golden("orders"), strict=True):
            check_line(json.loads(line), answer)
    finally:
        run_kfs("umount", str(mnt))

"""Odd entries where a partition's files belong (issue 29 item 4, issue 28 item 5): a FIFO, a
directory, a symbolic link (dangling, or to a file outside the log dir), a device or a socket
named like a segment, an index or a checkpoint.

kfs opens those files only as regular files (kfs.storage.files: O_NOFOLLOW | O_NONBLOCK, then
fstat), and notices an odd `.log` from the directory listing without opening it. An odd segment is
damage at its first byte: one sentence, the partition marked damaged in `kfs ls` / `info.json`, the
records before it served, the rest of the log dir untouched. An odd index is not trusted (the log
is scanned, as for a damaged index), an odd or unreadable `.txnindex` leaves read_committed to the
transaction markers, an odd checkpoint is taken as missing; each is said once. Nothing hangs: every
command here runs under a timeout. Through the mount: tests/test_fuse_odd_entries.py.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GOLDEN, KFS, LOGDIRS, read_jsonl

# seconds: a command that blocks on a FIFO fails here instead of hanging the suite
TIMEOUT = int(os.environ.get("KFS_TEST_ODD_TIMEOUT", "30"))
SECRET = b"root:$6$kfsSALT$0123456789abcdefSECRETHASH:19000:0:99999:7:::\n" * 4
NOT_REGULAR = "not a regular file: kfs reads only regular files"
KINDS = ["fifo", "directory", "dangling symlink", "symlink outside", "symlink inside", "device", "socket"]


def kfs(*args: str, env: dict[str, str] | None = None, prefix: list[str] | None = None) -> subprocess.CompletedProcess:
    """`kfs ARGS` under a timeout: a hang is a failure, not a stuck test run."""
    command = [*(prefix or []), *([KFS] if KFS and not prefix else [sys.executable, "-m", "kfs.cli.main"]), *args]
    try:
        return subprocess.run(command, capture_output=True, timeout=TIMEOUT, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"kfs {' '.join(args)} did not finish within {TIMEOUT} s (blocked on an odd entry?)")


def make_odd(path: Path, kind: str, outside: Path) -> None:
    """Put an entry of `kind` at `path` (whatever was there is removed); skip where not permitted."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
        (path / "inside").write_bytes(SECRET)
    elif kind == "dangling symlink":
        os.symlink(outside / "no-such-file", path)
    elif kind == "symlink outside":
        # a secret only root may read, and a FIFO: following the link would echo one or block on the other
        target = outside / "shadow"
        target.write_bytes(SECRET)
        os.chmod(target, 0o600)
        os.symlink(target, path)
    elif kind == "symlink inside":
        # the same log dir's own copy of the right file: still a symbolic link, still refused
        copy = path.parent.parent / f"copy-of-{path.parent.name}-{path.name}"
        shutil.copyfile(LOGDIRS_BY_PARTITION[path.parent.name] / path.parent.name / path.name, copy)
        os.symlink(copy, path)
    elif kind == "device":
        try:
            os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
        except PermissionError:
            pytest.skip("creating a device node needs CAP_MKNOD")
    elif kind == "socket":
        # bound from its directory: a socket's path must fit in 108 bytes
        subprocess.run([sys.executable, "-c", "import os, socket, sys; os.chdir(sys.argv[1]); "
                        "socket.socket(socket.AF_UNIX).bind(sys.argv[2])", str(path.parent), path.name], check=True)
    else:
        raise ValueError(kind)
    assert os.path.lexists(path)


def what(kind: str) -> str:
    return {"fifo": "a FIFO", "directory": "a directory", "dangling symlink": "a symbolic link",
            "symlink outside": "a symbolic link", "symlink inside": "a symbolic link",
            "device": "a character device", "socket": "a socket"}[kind]


LOGDIRS_BY_PARTITION = {"orders-0": Path(LOGDIRS[0]), "legacy-0": Path(LOGDIRS[0]), "payments-0": Path(LOGDIRS[1])}


def copy_logdir(tmp_path: Path, partitions: tuple[str, ...] = ("orders-0", "legacy-0", "payments-0")) -> Path:
    logdir = tmp_path / "logdir"
    for partition in partitions:
        shutil.copytree(LOGDIRS_BY_PARTITION[partition] / partition, logdir / partition)
    shutil.copy(Path(LOGDIRS[0]) / "meta.properties", logdir)
    (logdir / "cleaner-offset-checkpoint").write_text("0\n0\n")  # a broker's: nothing was ever compacted
    return logdir


def healthy(partition: str, *args: str) -> bytes:
    done = kfs("cat", str(LOGDIRS_BY_PARTITION[partition]), partition, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def lines_below(output: bytes, offset: int) -> bytes:
    return b"".join(line for line in output.splitlines(keepends=True) if json.loads(line)["offset"] < offset)


def lines_from(output: bytes, offset: int) -> bytes:
    return b"".join(line for line in output.splitlines(keepends=True) if json.loads(line)["offset"] >= offset)


def one_sentence(stderr: bytes) -> str:
    text = stderr.decode()
    assert "Traceback" not in text, text
    return text


# ---- an odd segment ----------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_an_odd_segment_in_the_middle_is_damage_after_the_records_before_it(tmp_path: Path, kind: str) -> None:
    logdir = copy_logdir(tmp_path)
    odd = logdir / "orders-0" / f"{661:020d}.log"
    make_odd(odd, kind, tmp_path)
    sentence = f"{odd} is {what(kind)}, {NOT_REGULAR}"

    listed = kfs("ls", str(logdir))  # the whole log dir: listed, the partition marked
    assert listed.returncode == 0, listed.stderr
    lines = {line.split()[0]: line for line in listed.stdout.decode().splitlines()}
    assert set(lines) == {"orders-0", "legacy-0", "payments-0"}
    assert "DAMAGED: 1 segment(s)" in lines["orders-0"] and "log end 1646" in lines["orders-0"]
    assert "DAMAGED" not in lines["legacy-0"] + lines["payments-0"]
    detail = kfs("ls", str(logdir), "orders-0")
    assert detail.returncode == 0 and f"DAMAGED: {sentence}" in detail.stdout.decode()
    info = json.loads(kfs("ls", "--json", str(logdir), "orders-0").stdout)
    problems = {s["base_offset"]: s["problems"] for s in info["segments"]}
    assert problems == {0: [], 313: [], 661: [sentence], 940: [], 1187: [], 1518: []}
    assert {s["base_offset"]: s["size"] for s in info["segments"]}[661] == 0
    whole = json.loads(kfs("ls", "--json", str(logdir)).stdout)
    assert [p["partition"] for p in whole if any(s["problems"] for s in p["segments"])] == [0]

    done = kfs("cat", str(logdir), "orders-0")
    assert done.returncode == 1 and done.stdout == lines_below(healthy("orders-0"), 661)
    assert one_sentence(done.stderr) == f"kfs: {sentence}\n"
    after = kfs("cat", str(logdir), "orders-0", "--offset", "940")
    assert after.returncode == 0 and after.stdout == lines_from(healthy("orders-0"), 940)
    lost = kfs("cat", str(logdir), "orders-0", "--offset", "700", "--format", "value")
    assert lost.returncode == 1 and one_sentence(lost.stderr) == f"kfs: {sentence}\n"
    assert kfs("locate", str(logdir), "orders-0", "--offset", "700").returncode == 1
    records = read_jsonl(GOLDEN / "orders-0" / "records.jsonl")
    inside = max(r["timestamp"] for r in records if 661 <= r["offset"] < 940)  # only the odd segment reaches it
    if inside > max(r["timestamp"] for r in records if r["offset"] < 661):
        timed = kfs("locate", str(logdir), "orders-0", "--time", str(inside))
        assert timed.returncode == 1 and one_sentence(timed.stderr) == f"kfs: {sentence}\n"  # not a later record
    skipped = kfs("cat", str(logdir), "orders-0", "--on-corrupt", "skip")
    assert skipped.returncode == 0
    errors = [json.loads(x) for x in skipped.stdout.splitlines() if b'"error"' in x]
    assert [(e["path"], e["position"], e["error"]) for e in errors] == [(str(odd), 0, sentence)]
    error_line = next(x for x in skipped.stdout.splitlines(keepends=True) if b'"error"' in x)
    assert skipped.stdout == lines_below(healthy("orders-0"), 661) + error_line + lines_from(healthy("orders-0"), 940)
    raw = kfs("cat", str(logdir), "orders-0", "--format", "raw")
    expected_raw = b"".join((Path(LOGDIRS[0]) / "orders-0" / f"{b:020d}.log").read_bytes() for b in (0, 313))
    assert raw.returncode == 1 and raw.stdout == expected_raw and one_sentence(raw.stderr) == f"kfs: {sentence}\n"
    for partition in ("legacy-0", "payments-0"):  # the rest of the log dir as if nothing happened
        other = kfs("cat", str(logdir), partition)
        assert other.returncode == 0 and other.stdout == healthy(partition)
    assert b"SECRET" not in b"".join([listed.stdout, detail.stdout, done.stderr, skipped.stdout, raw.stderr])


@pytest.mark.parametrize("kind", ["fifo", "directory", "dangling symlink", "symlink outside"])
def test_an_odd_active_segment_ends_the_log_where_it_starts(tmp_path: Path, kind: str) -> None:
    logdir = copy_logdir(tmp_path, ("orders-0", "legacy-0"))
    odd = logdir / "orders-0" / f"{1518:020d}.log"
    make_odd(odd, kind, tmp_path)
    sentence = f"{odd} is {what(kind)}, {NOT_REGULAR}"
    info = json.loads(kfs("ls", "--json", str(logdir), "orders-0").stdout)
    assert info["log_end_offset"] == 1518
    assert [s["problems"] for s in info["segments"]][-1] == [sentence]
    done = kfs("cat", str(logdir), "orders-0")
    assert done.returncode == 1 and done.stdout == lines_below(healthy("orders-0"), 1518)
    assert one_sentence(done.stderr) == f"kfs: {sentence}\n"
    at_end = kfs("cat", str(logdir), "orders-0", "--offset", "1518")  # from where it starts: still the damage
    assert at_end.returncode == 1 and at_end.stdout == b"" and one_sentence(at_end.stderr) == f"kfs: {sentence}\n"
    assert kfs("cat", str(logdir), "legacy-0").stdout == healthy("legacy-0")


def test_an_odd_only_segment_is_damage_not_an_empty_log(tmp_path: Path) -> None:
    logdir = copy_logdir(tmp_path, ("legacy-0",))
    (logdir / "lonely-0").mkdir()
    os.mkfifo(logdir / "lonely-0" / f"{0:020d}.log")
    listed = kfs("ls", str(logdir))
    assert listed.returncode == 0 and "DAMAGED" in next(x for x in listed.stdout.decode().splitlines()
                                                         if x.startswith("lonely-0"))
    done = kfs("cat", str(logdir), "lonely-0")
    assert done.returncode == 1 and done.stdout == b"" and "is a FIFO, not a regular file" in one_sentence(done.stderr)


# ---- odd and unreadable index files ----------------------------------------------------------------

@pytest.mark.parametrize("suffix", [".index", ".timeindex", ".txnindex"])
@pytest.mark.parametrize("kind", ["fifo", "directory", "dangling symlink", "symlink outside"])
def test_an_odd_index_is_not_trusted_and_costs_no_record(tmp_path: Path, suffix: str, kind: str) -> None:
    partition = "payments-0"  # transactional: its .txnindex files list aborted transactions
    logdir = copy_logdir(tmp_path, (partition, "legacy-0"))
    odd = logdir / partition / f"{256:020d}{suffix}"
    make_odd(odd, kind, tmp_path)
    sentence = f"{odd} is {what(kind)}, {NOT_REGULAR}"

    said = []
    for isolation in ("read_uncommitted", "read_committed"):
        done = kfs("cat", str(logdir), partition, "--isolation", isolation)
        assert done.returncode == 0, done.stderr
        assert done.stdout == healthy(partition, "--isolation", isolation)
        said.append(one_sentence(done.stderr))
        if suffix == ".txnindex" and isolation == "read_uncommitted":
            assert done.stderr == b""  # a read that does not need it never opens it
    records = read_jsonl(GOLDEN / partition / "records.jsonl")
    middle = next(r for r in records if r["offset"] >= 300)
    for args in (["--offset", str(middle["offset"])], ["--time", str(middle["timestamp"])]):
        located = kfs("locate", str(logdir), partition, *args)
        assert located.returncode == 0, located.stderr
        found, expected = (json.loads(x) for x in (located.stdout, kfs("locate", LOGDIRS[1], partition, *args).stdout))
        if suffix == ".index" or (suffix == ".timeindex" and args[0] == "--time"):
            assert found.pop("index_entry") is None and expected.pop("index_entry") is not None  # (unused)
        assert found == expected
        said.append(one_sentence(located.stderr))
    assert sentence in "".join(said) and "SECRET" not in "".join(said)  # said, where the file was wanted
    listed = kfs("ls", str(logdir))
    assert listed.returncode == 0
    lines = {line.split()[0]: line for line in listed.stdout.decode().splitlines()}
    assert "DAMAGED: 1 segment(s)" in lines[partition] and "DAMAGED" not in lines["legacy-0"]
    info = json.loads(kfs("ls", "--json", str(logdir), partition).stdout)
    problems = {s["base_offset"]: s["problems"] for s in info["segments"]}
    assert [b for b, p in problems.items() if p] == [256] and len(problems[256]) == 1
    assert problems[256][0].startswith(sentence)
    assert info["log_end_offset"] == 645


# ---- odd checkpoints ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["log-start-offset-checkpoint", "cleaner-offset-checkpoint", "meta.properties"])
@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink outside"])
def test_an_odd_checkpoint_is_taken_as_missing_and_said(tmp_path: Path, name: str, kind: str) -> None:
    logdir = copy_logdir(tmp_path, ("orders-0", "legacy-0"))
    odd = logdir / name
    make_odd(odd, kind, tmp_path)
    sentence = f"{odd} is {what(kind)}, {NOT_REGULAR}"
    listed = kfs("ls", str(logdir))
    assert listed.returncode == 0 and "DAMAGED" not in listed.stdout.decode()
    for args in ([], ["-J"], ["--offset", "700", "--count", "3"]):
        done = kfs("cat", str(logdir), "orders-0", *args)
        assert done.returncode == 0, done.stderr
        assert done.stdout == healthy("orders-0", *args).replace(b'"broker":1,', b'"broker":-1,') \
            if name == "meta.properties" else done.stdout == healthy("orders-0", *args)
        assert b"SECRET" not in done.stderr
        if (name != "meta.properties" and not args) or args == ["-J"]:  # (a read of the whole log, or -J's broker)
            assert sentence in one_sentence(done.stderr)


# ---- no byte of a file that is not a segment in an error ------------------------------------------

@pytest.mark.parametrize("content", ["text", "binary"])
def test_a_regular_file_that_is_not_a_segment_shows_none_of_its_bytes(tmp_path: Path, content: str) -> None:
    """A file named like a segment holding something else (a hard link to a secret, a copy gone
    wrong): the error says it is no segment; no magic, length or offset read from it is echoed."""
    logdir = copy_logdir(tmp_path, ("orders-0",))
    segment = logdir / "orders-0" / f"{661:020d}.log"
    if content == "text":
        data = SECRET  # byte 16 is an ASCII letter: "unknown magic 76" echoed it
    else:
        data = bytearray(SECRET)
        data[8:12] = (0x51525354).to_bytes(4, "big")  # a length field "QRST", and a valid magic
        data[16] = 2
        data = bytes(data)
    segment.write_bytes(data)
    numbers = {str(b) for b in data}  # every byte, int32 and int64 the file holds, as a number
    for width in (4, 8):
        numbers |= {str(int.from_bytes(data[i:i + width], "big", signed=True)) for i in range(len(data) - width + 1)}
    outputs = []
    for args in ([], ["--offset", "700"], ["--on-corrupt", "skip"], ["--format", "raw"]):
        done = kfs("cat", str(logdir), "orders-0", *args)
        outputs.append(done.stderr + b"".join(x for x in done.stdout.splitlines() if b'"error"' in x))
    for args in (["ls", str(logdir)], ["ls", str(logdir), "orders-0"], ["ls", "--json", str(logdir)]):
        done = kfs(*args)
        assert done.returncode == 0
        outputs.append(done.stdout + done.stderr)
    said = b"\n".join(outputs).decode()
    assert "not a Kafka log segment" in said
    words = set(said.replace(":", " ").replace(",", " ").replace("(", " ").replace(")", " ").split())
    leaked = sorted(w for w in words if w in numbers and w not in {"0", "1", "661", str(len(data))})
    assert not leaked, f"values read from the file appear in the errors: {leaked}\n{said}"
    assert "SECRET" not in said and "magic" not in said


# ---- an unreadable .txnindex, as a user who may not read it -------------------------------------------

def _nobody_python() -> list[str] | None:
    """An interpreter user `nobody` may run with kfs and its dependencies importable, else None."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None
    import kfs as kfs_package

    paths = [str(Path(kfs_package.__file__).parent.parent), *[p for p in sys.path if p.endswith("site-packages")]]
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": ":".join(paths)}
    for python in (sys.executable, "/usr/bin/python3"):
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env",
                   *[f"{k}={v}" for k, v in env.items()], python]
        probe = subprocess.run([*command, "-c", "import kfs.cli.main"], capture_output=True, timeout=TIMEOUT)
        if probe.returncode == 0:
            return command
    return None


@pytest.fixture
def shared_dir() -> Path:
    """A directory user nobody can reach (pytest's tmp_path is root's alone)."""
    shared = Path(f"/tmp/kfs-test-odd-{os.getpid()}")
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    yield shared
    shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.parametrize("unreadable", [".txnindex", ".index", ".timeindex"])
def test_an_unreadable_index_as_an_unprivileged_user(shared_dir: Path, unreadable: str) -> None:
    command = _nobody_python()
    if command is None:
        pytest.skip("needs root, setpriv and a python user nobody can run")
    logdir = copy_logdir(shared_dir, ("payments-0",))
    for path in [logdir, *logdir.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    os.chmod(logdir / "payments-0" / f"{256:020d}{unreadable}", 0o000)  # root's, and nobody may read it
    python = command[-1]
    prefix = [*command[:-1], f"XDG_CACHE_HOME={shared_dir / 'cache'}", python, "-m", "kfs.cli.main"]
    for isolation in ("read_uncommitted", "read_committed"):
        done = subprocess.run([*prefix, "cat", str(logdir), "payments-0", "--isolation", isolation],
                              capture_output=True, timeout=TIMEOUT)
        assert done.returncode == 0, done.stderr
        assert done.stdout == healthy("payments-0", "--isolation", isolation)
        if unreadable == ".txnindex" and isolation == "read_committed":
            assert f"{logdir / 'payments-0' / f'{256:020d}.txnindex'}" in one_sentence(done.stderr)
            assert "Permission denied" in done.stderr.decode()
        if unreadable == ".txnindex" and isolation == "read_uncommitted":
            assert done.stderr == b""  # a read that does not need it never touches it
    listed = subprocess.run([*prefix, "ls", str(logdir)], capture_output=True, timeout=TIMEOUT)
    assert listed.returncode == 0, listed.stderr


def test_kfs_dump_reads_the_files_it_is_given_links_or_not(tmp_path: Path) -> None:
    """The rule is for a log dir's own files: `kfs dump` reads what a user names, as Kafka's tool does."""
    source = Path(LOGDIRS[0]) / "orders-0"
    for suffix in (".log", ".index", ".timeindex"):
        (tmp_path / f"{661:020d}{suffix}").symlink_to(source / f"{661:020d}{suffix}")
    for suffix in (".log", ".index", ".timeindex"):
        linked = kfs("dump", str(tmp_path / f"{661:020d}{suffix}"))
        direct = kfs("dump", str(source / f"{661:020d}{suffix}"))
        assert linked.returncode == direct.returncode == 0 and linked.stderr == direct.stderr
        assert linked.stdout.replace(str(tmp_path).encode(), str(source).encode()) == direct.stdout
        assert len(linked.stdout.splitlines()) > 5

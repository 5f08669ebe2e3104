"""A mount's life as an operator meets it: libfuse's reason when a mount fails, a dead daemon's
mountpoint cleared by `kfs umount`, `-f` stopped by a signal, `df`, non-empty mountpoints, `--version`."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import LOGDIRS, run_kfs
from mounts import daemon_errors, needs_fuse

import kfs

pytestmark = needs_fuse


def _wait_mounted(mountpoint: Path, process: subprocess.Popen | None = None) -> None:
    for _ in range(400):
        if os.path.ismount(mountpoint):
            return
        assert process is None or process.poll() is None, process.communicate()
        time.sleep(0.05)
    raise AssertionError(f"{mountpoint} never mounted")


def _in_mount_table(mountpoint: Path) -> bool:
    return any(line.split()[4] == str(mountpoint) for line in Path("/proc/self/mountinfo").read_text().splitlines())


def _one_sentence(stderr: bytes) -> str:
    text = stderr.decode()
    assert text.startswith("kfs: ") and text.count("\n") == 1 and "Traceback" not in text, text
    return text


def test_an_unknown_option_fails_with_libfuses_reason(tmp_path: Path) -> None:
    (tmp_path / "mnt").mkdir()
    done = run_kfs("mount", "-o", f"no_such_option,log={tmp_path / 'log'}", LOGDIRS[0], str(tmp_path / "mnt"))
    assert done.returncode == 1
    text = _one_sentence(done.stderr)
    assert "libfuse says: unknown option(s): `-o no_such_option'" in text, text
    assert not _in_mount_table(tmp_path / "mnt")
    foreground = run_kfs("mount", "-f", "-o", f"no_such_option,log={tmp_path / 'log'}", LOGDIRS[0],
                         str(tmp_path / "mnt"))
    assert foreground.returncode == 1
    assert "Traceback" not in foreground.stderr.decode()
    assert foreground.stderr.decode().splitlines()[-1].endswith("libfuse says: unknown option(s): `-o no_such_option'.")


def _nobody_python() -> list[str] | None:
    """An interpreter user `nobody` may run with kfs and its dependencies importable, else None."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None
    paths = [str(Path(kfs.__file__).parent.parent), *[p for p in sys.path if p.endswith("site-packages")]]
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": ":".join(paths)}
    for python in (sys.executable, "/usr/bin/python3"):
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", *[f"{k}={v}" for k, v in
                   env.items()], python]
        probe = subprocess.run([*command, "-c", "import mfusepy, kfs.cli.main"], capture_output=True)
        if probe.returncode == 0:
            return command
    return None


def test_a_user_without_access_to_dev_fuse_is_told_so(tmp_path_factory: pytest.TempPathFactory) -> None:
    command = _nobody_python()
    if command is None or os.stat("/dev/fuse").st_mode & 0o006:
        pytest.skip("needs root, setpriv, a python user nobody can run, and /dev/fuse closed to others")
    shared = Path(f"/tmp/kfs-test-nobody-{os.getpid()}")
    shared.mkdir(mode=0o777)
    try:
        os.chmod(shared, 0o777)
        (shared / "mnt").mkdir()
        os.chown(shared / "mnt", 65534, 65534)
        done = subprocess.run([*command, "-m", "kfs.cli.main", "mount", "-o", f"log={shared / 'log'}", LOGDIRS[0],
                               str(shared / "mnt")], capture_output=True, timeout=60)
        assert done.returncode == 1
        assert "libfuse says: failed to open /dev/fuse: Permission denied" in _one_sentence(done.stderr)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_kfs_umount_clears_a_mount_whose_daemon_died(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "log"
    assert run_kfs("mount", "-o", f"log={log}", LOGDIRS[0], str(mnt)).returncode == 0
    try:
        _kill_the_daemon_and_clear_its_mount(mnt, log)
    finally:
        if _in_mount_table(mnt):
            subprocess.run(["fusermount3", "-uz", str(mnt)], check=False)


def _kill_the_daemon_and_clear_its_mount(mnt: Path, log: Path) -> None:
    daemon = int(log.read_text().split(" INFO kfs.fuse: starting daemon")[0].split()[-1])
    os.kill(daemon, signal.SIGKILL)
    for _ in range(100):
        try:
            os.listdir(mnt)
        except OSError as exc:
            if exc.errno == errno.ENOTCONN:  # "Transport endpoint is not connected"
                break
            assert exc.errno == errno.ECONNABORTED, exc  # a request the kernel was waiting on
        time.sleep(0.05)
    else:
        raise AssertionError("the mount kept answering after its daemon was killed")
    again = run_kfs("mount", "-o", f"log={log}", LOGDIRS[0], str(mnt))
    assert again.returncode == 1
    assert f"clear it with `kfs umount {mnt}`" in _one_sentence(again.stderr)
    done = run_kfs("umount", str(mnt))
    assert done.returncode == 0, done.stderr
    assert not _in_mount_table(mnt) and os.listdir(mnt) == []
    assert run_kfs("mount", "-o", f"log={log}", LOGDIRS[0], str(mnt)).returncode == 0  # usable again
    try:
        assert "orders-0" in os.listdir(mnt)
    finally:
        assert run_kfs("umount", str(mnt)).returncode == 0


def test_kfs_umount_refuses_a_mount_that_is_not_kfs(tmp_path: Path) -> None:
    """As root, `kfs umount /var/lib/kafka` must not unmount the broker's data disk: a tmpfs stands in."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root to mount a tmpfs")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "kfs-test-tmpfs", str(disk)], check=True)
    try:
        (disk / "00000000000000000000.log").write_bytes(b"broker data")
        done = run_kfs("umount", str(disk))
        assert done.returncode != 0
        text = _one_sentence(done.stderr)
        assert text == (f"kfs: {disk} is not a kfs mount (it is tmpfs): kfs umount unmounts only kfs's own "
                        "mounts.\n"), text
        assert _in_mount_table(disk) and (disk / "00000000000000000000.log").read_bytes() == b"broker data"
        lazy = run_kfs("umount", "-z", str(disk))
        assert lazy.returncode != 0 and "is not a kfs mount" in _one_sentence(lazy.stderr)
        assert _in_mount_table(disk)
    finally:
        if _in_mount_table(disk):
            subprocess.run(["umount", str(disk)], check=False)
    assert not _in_mount_table(disk)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_foreground_mount_stopped_by_a_signal_unmounts_and_exits_0(tmp_path: Path, signum: int) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    command = [shutil.which("kfs") or sys.executable, *([] if shutil.which("kfs") else ["-m", "kfs.cli.main"])]
    process = subprocess.Popen([*command, "mount", "-f", "-o", f"log={tmp_path / 'log'}", LOGDIRS[0], str(mnt)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_mounted(mnt, process)
        assert "orders-0" in os.listdir(mnt)
        process.send_signal(signum)  # Ctrl-C is SIGINT to the foreground process
        _out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
        if _in_mount_table(mnt):
            subprocess.run(["fusermount3", "-uz", str(mnt)], check=False)
    assert process.returncode == 0, err
    assert b"Traceback" not in err and b"ERROR" not in err
    assert not _in_mount_table(mnt)
    assert daemon_errors(tmp_path / "log") == []


def test_df_shows_the_log_dirs_filesystem_not_a_full_disk(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    assert run_kfs("mount", "-o", f"log={tmp_path / 'log'}", *LOGDIRS, str(mnt)).returncode == 0
    try:
        mounted, underlying = os.statvfs(mnt), os.statvfs(LOGDIRS[0])
        df = subprocess.run(["df", "-P", str(mnt)], capture_output=True, text=True, check=True).stdout
    finally:
        run_kfs("umount", str(mnt))
    assert mounted.f_blocks * mounted.f_frsize == underlying.f_blocks * underlying.f_frsize
    assert abs(mounted.f_bavail - underlying.f_bavail) * underlying.f_frsize < 1 << 30  # the disk may move a bit
    capacity = df.splitlines()[-1].split()[4]
    assert capacity != "100%" and capacity == subprocess.run(
        ["df", "-P", LOGDIRS[0]], capture_output=True, text=True, check=True).stdout.splitlines()[-1].split()[4]


def test_a_non_empty_mountpoint_is_refused_unless_nonempty(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    (mnt / "notes.txt").write_text("mine\n")
    done = run_kfs("mount", "-o", f"log={tmp_path / 'log'}", LOGDIRS[0], str(mnt))
    assert done.returncode == 1
    assert "is not empty" in _one_sentence(done.stderr) and "-o nonempty" in done.stderr.decode()
    assert not _in_mount_table(mnt)
    done = run_kfs("mount", "-o", f"nonempty,log={tmp_path / 'log'}", LOGDIRS[0], str(mnt))
    assert done.returncode == 0, done.stderr
    try:
        assert "orders-0" in os.listdir(mnt)
    finally:
        assert run_kfs("umount", str(mnt)).returncode == 0
    assert (mnt / "notes.txt").read_text() == "mine\n"


def test_one_fstab_source_mounts_all_of_a_brokers_log_dirs(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = run_kfs(",".join(LOGDIRS), str(mnt), "-o", f"ro,log={tmp_path / 'log'}")  # as mount.fuse3 runs it
    assert done.returncode == 0, done.stderr
    try:
        names = os.listdir(mnt)
    finally:
        run_kfs("umount", str(mnt))
    assert "orders-0" in names and "payments-0" in names  # broker-a and broker-b


def test_version() -> None:
    done = run_kfs("--version")
    assert done.returncode == 0 and done.stdout.decode() == f"kfs {kfs.__version__}\n"

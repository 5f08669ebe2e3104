"""The front door as a new operator meets it: help that describes the mounted tree and every option,
log dirs given the same way to every command, and a wrong partition name answered with the nearest."""

from __future__ import annotations

from pathlib import Path

from conftest import LOGDIRS, kfs_command, run_kfs

REGISTRY_LOGDIR = Path(__file__).parent / "fixtures" / "schema-registry" / "logdir"


def test_help_describes_the_mounted_tree_and_every_cat_option() -> None:
    for command in ([], ["mount"]):
        shown = run_kfs(*command, "--help").stdout.decode()
        for name in ("messages.jsonl", "info.json", "offset/N.value", "time/T", ".groups/", ".schemas/"):
            assert name in shown, (command, name)
    cat = run_kfs("cat", "--help").stdout.decode()
    for option in ("--isolation", "--control", "--on-corrupt", "--decode"):
        described = cat.split(option)[-1].split("\n  -")[0]
        assert len(described.split()) > 3, option  # more than the option's choices


def test_cat_and_locate_take_several_log_dirs_as_ls_does() -> None:
    both = run_kfs("cat", *LOGDIRS, "payments-0", "--count", "1")
    alone = run_kfs("cat", LOGDIRS[1], "payments-0", "--count", "1")
    assert both.returncode == 0 and both.stdout == alone.stdout and both.stdout.count(b"\n") == 1
    located = run_kfs("locate", *LOGDIRS, "orders-0", "--offset", "5")
    assert located.returncode == 0 and b'"segment_base_offset"' in located.stdout
    listed = run_kfs("ls", *LOGDIRS)
    assert listed.returncode == 0 and b"payments-0" in listed.stdout and b"orders-0" in listed.stdout


def test_a_wrong_partition_names_the_nearest() -> None:
    done = run_kfs("cat", LOGDIRS[0], "orderz-0")
    assert done.returncode == 1 and b"no partition orderz-0" in done.stderr and b"nearest: orders-0" in done.stderr
    missing = run_kfs("cat", LOGDIRS[0])
    assert missing.returncode != 0 and b"TOPIC-PARTITION" in missing.stderr


def test_every_subcommand_is_one_where_a_directory_has_its_name(tmp_path: Path) -> None:
    """`kfs schemas LOGDIR` run where ./schemas is a directory was taken for the mount form `kfs LOGDIR
    MOUNTPOINT` (a hand-kept list of subcommands had lost `schemas`)."""
    import subprocess

    from kfs.cli.main import subcommand_names
    names = subcommand_names()
    assert {"ls", "cat", "schemas", "replicas", "groups", "mount"} <= names
    for name in names:
        (tmp_path / name).mkdir()
    done = subprocess.run([*kfs_command(), "schemas", str(REGISTRY_LOGDIR)], cwd=tmp_path, capture_output=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert b"orders-value" in done.stdout

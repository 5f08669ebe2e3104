"""The front door as a new operator meets it: help that describes the mounted tree and every option,
log dirs given the same way to every command, and a wrong partition name answered with the nearest."""

from __future__ import annotations

from conftest import LOGDIRS, run_kfs


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

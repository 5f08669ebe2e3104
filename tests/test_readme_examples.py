"""The README's examples are what kfs prints: each shell session in README.md that needs no mount and
no Spark is run as written (bash, from the repository's root) and its output compared line by line.

A line `...` in the README stands for any number of lines. The README shows this checkout's path where
kfs prints absolute paths; it is read as the root of the checkout the test runs in. Sessions that
mount (they are checked by the FUSE tests) or start Spark (tests/test_spark_*.py) are left out.
Found drifting when first run: none (the README had just been rewritten from real runs); the
`.groups` listing had drifted before.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_ROOT = "/work/main"  # where the README's outputs were made
SKIPPED = re.compile(r"\bmount\b|\bumount\b|\bspark\b|/mnt/|mountpoints/|make ")
ASSIGNMENT = re.compile(r"^[A-Z]+=\S+(; [A-Z]+=\S+)*$")  # `A=...; B=...`: names later sessions use


def assignments_before(line: int) -> list[str]:
    """The README's variable assignments above `line`, in order (a session uses $A set in an earlier one)."""
    return [text[2:] for number, text in enumerate(README.read_text().splitlines(), 1)
            if number < line and text.startswith("$ ") and ASSIGNMENT.match(text[2:])]


def sessions() -> list[tuple[int, list[tuple[str, list[str]]]]]:
    """Each fenced block of `$ command` lines and their output: (line number, [(command, output lines)])."""
    found = []
    lines = README.read_text().splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("```") and i + 1 < len(lines) and lines[i + 1].startswith("$ "):
            start, steps = i + 1, []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                if lines[i].startswith("$ "):
                    command = lines[i][2:]
                    while command.endswith("\\"):  # a command continued on the next line
                        i += 1
                        command = command[:-1] + "\n" + lines[i]
                    steps.append((command, []))
                elif steps:
                    steps[-1][1].append(lines[i])
                i += 1
            if not any(SKIPPED.search(command) for command, _ in steps):
                found.append((start + 1, steps))
        i += 1
    return found


def matches(expected: list[str], actual: list[str]) -> bool:
    """`expected` equals `actual`, a `...` line standing for any number of lines."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(matches(expected[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and expected[0] == actual[0] and matches(expected[1:], actual[1:])


def _scratch_names(steps: list[tuple[str, list[str]]]) -> dict[str, str]:
    """For each /tmp/NAME a session writes, a new directory name of the same length (the README's
    outputs are cut(1) to widths its paths were measured with): sessions never meet an old copy."""
    names = {}
    for command, _ in steps:
        for name in re.findall(r"/tmp/([A-Za-z0-9_-]+)", command):
            if name not in names:
                while True:
                    fresh = "k" + os.urandom(len(name)).hex()[:len(name) - 1]
                    if not os.path.exists(f"/tmp/{fresh}"):
                        break
                names[name] = fresh
    return names


def test_the_readme_sessions_print_what_they_show() -> None:
    """Every checked session, in the README's order, in one shell (a later session uses what an earlier
    one made: the damaged copy under /tmp, given a fresh name of the same length)."""
    checked = sessions()
    if shutil.which("jq") is None:
        checked = [(line, steps) for line, steps in checked if not any("jq" in c for c, _ in steps)]
    renamed = _scratch_names([step for _, steps in checked for step in steps])

    def fresh(text: str) -> str:
        for old, new in renamed.items():
            text = text.replace(f"/tmp/{old}", f"/tmp/{new}")
        return text

    script = ["exec 2>&1", f"kfs() {{ {sys.executable} -m kfs.cli.main \"$@\"; }}"]
    expected: list[tuple[int, str, list[str]]] = []
    for line, steps in checked:
        script += assignments_before(line)
        for command, shown in steps:
            script.append(f"echo '--- kfs readme step {len(expected)} ---'\n{fresh(command)}")
            expected.append((line, command, [fresh(e.replace(README_ROOT + "/", str(ROOT) + "/")) for e in shown]))
    try:
        done = subprocess.run(["bash", "-c", "\n".join(script)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    finally:
        for name in renamed.values():
            shutil.rmtree(f"/tmp/{name}", ignore_errors=True)
    outputs = re.split(r"--- kfs readme step \d+ ---\n", done.stdout)[1:]
    assert len(outputs) == len(expected), (done.stdout[-3000:], done.stderr[-3000:])
    wrong = []
    for (line, command, shown), output in zip(expected, outputs, strict=True):
        actual = output.rstrip("\n").split("\n") if output.strip() else []
        if not matches(shown, actual):
            wrong.append(f"README line {line}: $ {command}\nshows:\n" + "\n".join(shown) + "\nprints:\n"
                         + "\n".join(actual))
    assert not wrong, "\n\n".join(wrong)


def test_the_readme_has_sessions_to_check() -> None:
    assert len(sessions()) >= 4  # (the check would pass on a README whose examples all went)

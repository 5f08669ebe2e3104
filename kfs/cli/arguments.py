"""Argument types shared by the `kfs` subcommands."""

from __future__ import annotations

import argparse


def non_negative_int(text: str) -> int:
    """argparse type: a whole number >= 0, with a one-sentence error otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"'{text}' must not be negative")
    return value

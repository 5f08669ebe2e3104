"""The compiled hot loops of kfs: one extension module (`_speedups`, built from csrc/), an owner per layer.

Each C file lives in csrc/<layer>/, the layer whose Python it speeds up: record/ (decoding, CRC-32C,
lz4 frames, the records walk), storage/ (index search, a `.value` lookup's walk), views/ (the JSON
lines, their lengths, kcat's output, the plain-batch walk), cli/ (`kfs dump`'s record lines), fuse/
(read replies, small files answered inside libfuse), registry/ (Avro datums to JSON text by a program
compiled from the schema). Each layer's Python imports its own facade (kfs._native.record, .storage,
.views, .cli, .fuse, .registry) and nothing else of this package.

Why one package and one shared object, not C beside each layer's Python: the layers' C shares
primitives (varints, the records walk, CRC-32C, JSON escaping) and one call crosses layers without the
GIL (walk_v2_run walks storage's batches and renders views' lines), so it links into one object; one
package keeps that object, its headers, its stub (_speedups.pyi) and its build line in one place,
while the directories keep the owners. A layer's C uses its own layer's and the layers' below, as its
Python does (record <- storage <- views <- cli, fuse).

Every entry point is the compiled function, or None when the extension was not built (pyproject.toml
marks it optional: an install without a C compiler succeeds) or KFS_PURE_PYTHON=1 is set (to compare,
or to rule it out): callers then keep their Python loop, which stays the reference and the fallback.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING

__all__ = ["BUILT", "extension"]


def _load() -> ModuleType | None:
    """The extension, or None without it."""
    if os.environ.get("KFS_PURE_PYTHON"):
        return None
    try:
        from kfs._native import _speedups
    except ImportError:
        return None
    return _speedups


_loaded = _load()
BUILT = _loaded is not None
if TYPE_CHECKING:  # typed by _speedups.pyi; a facade reads `extension.f if BUILT else None`
    from kfs._native import _speedups as extension
else:
    extension = _loaded
if BUILT:
    # Handed the Record class it creates and the error it raises, into its module state. Imported after
    # `extension` is set: the import runs kfs.record's __init__, whose facade (kfs._native.record) reads it.
    from kfs.record.types import CorruptBatchError, Record

    extension.init(Record, CorruptBatchError)

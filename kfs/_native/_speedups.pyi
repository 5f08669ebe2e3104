"""The signatures of the compiled module kfs._native._speedups (csrc/module.c's method table), for mypy.

tests/test_native.py holds this stub and the built module to the same names and parameters. A buffer
argument takes any object with the buffer protocol (bytes, memoryview, mmap); the functions without
keywords are positional-only, as PyArg_ParseTuple makes them.
"""

from collections.abc import Callable, Iterable, Sequence
from typing import Literal, overload

from typing_extensions import Buffer

from kfs.record.types import Record

# ---- the module (module.c) -------------------------------------------------------------------------

def init(record_type: type[Record], corrupt_batch_error: type[Exception], /) -> None: ...

# ---- record/ ------------------------------------------------------------------------------------

def decode_v2_records(payload: Buffer, count: int, base_offset: int, base_timestamp: int, timestamp_type: str,
                      log_append_time: int, position: int | None = None) -> list[Record]: ...
def crc32c(data: Buffer, /) -> int | None: ...

# ---- storage/ -----------------------------------------------------------------------------------

def find_v2_batch(window: Buffer, window_position: int, segment_base: int, limit: int, entry_offset: int, end: int,
                  target: int, /) -> tuple[int, int] | int | None: ...
def v2_record_at(batch: Buffer, segment_base: int, target: int, timestamp_type: str, /
                 ) -> Record | Literal[False] | None: ...
def index_slot(mapping: Buffer, entries: int, entry_size: int, base_offset: int, target: int, /) -> int: ...

# ---- views/ -------------------------------------------------------------------------------------

@overload
def render_jsonl(prefix: str, records: Iterable[Record], fallback: Callable[[str, Record], str],
                 lines: Literal[False] = False, avro: dict[bytes, tuple[object, str] | bool] | None = None
                 ) -> bytes: ...
@overload
def render_jsonl(prefix: str, records: Iterable[Record], fallback: Callable[[str, Record], str],
                 lines: Literal[True], avro: dict[bytes, tuple[object, str] | bool] | None = None
                 ) -> list[bytes]: ...
def count_jsonl(payload: Buffer, count: int, base_offset: int, base_timestamp: int, timestamp_type: str,
                log_append_time: int, prefix: str, first_offset: int, end_offset: int,
                last_offset: int = ...) -> tuple[int, int, int] | None: ...
@overload
def render_v2_jsonl(payload: Buffer, count: int, base_offset: int, base_timestamp: int, timestamp_type: str,
                    log_append_time: int, prefix: str, first_offset: int, end_offset: int,
                    lines: Literal[False] = False, last_offset: int = ...) -> bytes | None: ...
@overload
def render_v2_jsonl(payload: Buffer, count: int, base_offset: int, base_timestamp: int, timestamp_type: str,
                    log_append_time: int, prefix: str, first_offset: int, end_offset: int,
                    lines: Literal[True], last_offset: int = ...) -> tuple[bytes, bytes] | None: ...
@overload
def render_v2_jsonl(payload: Buffer, count: int, base_offset: int, base_timestamp: int, timestamp_type: str,
                    log_append_time: int, prefix: str, first_offset: int, end_offset: int,
                    lines: bool, last_offset: int = ...) -> bytes | tuple[bytes, bytes] | None: ...
def walk_v2_run(window: Buffer, segment_base: int, previous_last: int | None, max_last: int, first_offset: int,
                end_offset: int, prefix: str, read_committed: bool, count_only: bool, budget: int,
                kcat: Buffer | None = None, null: Buffer = b""
                ) -> tuple[int, int, int, int, bytes, bytes | None] | None: ...

# ---- cli/ ---------------------------------------------------------------------------------------

def render_v2_dump(payload: Buffer, count: int, base_offset: int, base_timestamp: int, timestamp_type: str,
                   log_append_time: int, base_sequence: int, previous_offset: int, batch: Buffer | None = None,
                   position: int = 0, compression: str = "none", valid: bool = True
                   ) -> tuple[str, int, bytes] | None: ...

# ---- registry/ ----------------------------------------------------------------------------------

def avro_program(program: bytes, /) -> object: ...
def render_avro(program: object, data: Buffer, start: int = 0, /) -> str | None: ...
def avro_arrow_program(program: bytes, /) -> object: ...
def avro_arrow_decode(program: object, prefix: bytes, count: int, validity: Buffer | None, offsets: Buffer,
                      data: Buffer, offset: int, skip: Buffer | None, /
                      ) -> tuple[bytes, list[tuple[int, bytes, bytes, bytes | None]]]: ...

# ---- spark/ -------------------------------------------------------------------------------------

def arrow_builder() -> object: ...
def arrow_append_v2(builder: object, payload: Buffer, count: int, base_offset: int, base_timestamp: int,
                    log_append_time: int | None, first_offset: int, end_offset: int, last_offset: int, /
                    ) -> tuple[int, int] | Literal[False] | None: ...
def arrow_append_run(builder: object, window: Buffer, segment_base: int, previous_last: int | None, max_last: int,
                     first_offset: int, end_offset: int, read_committed: bool, rows: int, /
                     ) -> tuple[int, int, int, int, int] | None: ...
def arrow_append_records(builder: object, records: Sequence[Record], /) -> int | Literal[False]: ...
def arrow_take(builder: object, /) -> tuple[tuple[int, int, int, int, int], object, tuple[tuple[int, int], ...]]: ...

# ---- fuse/ --------------------------------------------------------------------------------------

def gather(pieces: Sequence[Buffer], /) -> int: ...
def small_files_put(path: str, data: Buffer, rendered: float, /) -> None: ...
def small_files_clear() -> tuple[int, int]: ...
def small_files_install(operations: int, open_at: int, read_buf_at: int, release_at: int, fh_at: int, flags_at: int,
                        direct_io_at: int, direct_io_bit: int, reuse_seconds: float, all_direct_io: bool, /
                        ) -> None: ...

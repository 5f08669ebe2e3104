"""Protobuf payloads to protobuf's JSON mapping (docs/spec.md section 9), with the `protobuf` package.

A Protobuf schema in the registry is `.proto` text (its imports are other subjects' schemas, named
by the references, or the well-known types). It is compiled once, in-process, by the protoc that
grpcio-tools bundles (with the well-known types' files): every file is handed to protoc as a memfd
mapped to its import name (`-Icrm/address.proto=/proc/self/fd/N`), and the descriptor set comes back
in another memfd, so nothing is written anywhere. The framed payload is the message-index list (a
zigzag-varint count then that many zigzag-varint indexes, the single byte 0 meaning `[0]`: the path
from the file's top-level messages down nested ones) then the message, rendered by `json_format`
with its defaults: lowerCamelCase names, default values left out, 64-bit integers as strings, enums
by name, bytes in base64, well-known types in their JSON forms.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from kfs._native.registry import protobuf_program, render_protobuf
from kfs.registry.protobuf_program import compile_message

_COMPILE_LOCK = threading.Lock()  # protoc's in-process entry point is not known to be reentrant
MAIN_NAME = "kfs_registry_schema.proto"
MAX_INDEXES = 64  # a message-index list longer than any nesting


class ProtobufSchemaError(ValueError):
    """A schema text that does not compile as Protobuf (one sentence)."""


class ProtobufPayloadError(ValueError):
    """A payload that does not decode with its schema (one sentence)."""


def _zigzag(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ProtobufPayloadError("the message-index list ends early")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def message_indexes(data: bytes | memoryview) -> tuple[list[int], int]:
    """The message-index list at the start of a payload, and where the message starts."""
    count, pos = _zigzag(data, 0)
    if count == 0:
        return [0], pos
    if not 0 < count <= MAX_INDEXES:
        raise ProtobufPayloadError(f"the message-index list declares {count} indexes")
    indexes = []
    for _ in range(count):
        index, pos = _zigzag(data, pos)
        indexes.append(index)
    return indexes, pos


class ProtobufRenderer:
    """One Protobuf schema (and the schemas it imports), compiled once."""

    def __init__(self, schema_text: str, imports: list[tuple[str, str]]) -> None:
        """`imports`: (import name, .proto text) of each schema it references, directly or not."""
        from google.protobuf import descriptor_pb2, descriptor_pool

        data = _compile(schema_text, imports)
        try:
            files = descriptor_pb2.FileDescriptorSet.FromString(data)
            self.pool = descriptor_pool.DescriptorPool()
            for f in files.file:
                self.pool.Add(f)
            self.file = self.pool.FindFileByName(MAIN_NAME)
        except Exception as e:
            raise ProtobufSchemaError(f"the schema does not compile as Protobuf ({type(e).__name__}: {e})") from None
        self._classes: dict[tuple[int, ...], tuple[Any, str]] = {}
        self._programs: dict[tuple[int, ...], object | None] = {}  # (compiled renderers, kfs.registry.protobuf_program)

    def render(self, body: bytes) -> tuple[str, str]:
        """The message's JSON text and its full name; ProtobufPayloadError when it does not decode. By the
        compiled renderer where it answers (protobuf_json.c: the same text), else `render_python`."""
        if render_protobuf is not None:
            indexes, start = message_indexes(body)
            program, name = self.program(tuple(indexes))
            if program is not None:
                text = render_protobuf(program, body, start)
                if text is not None:
                    return text, name
        return self.render_python(body)

    def program(self, indexes: tuple[int, ...]) -> tuple[object | None, str]:
        """The compiled renderer's program for the message `indexes` name (None: that message has none, or
        the extension is not built) and the message's full name; ProtobufPayloadError for indexes that name
        no message."""
        cls, name = self._message_class(indexes)
        program = self._programs.get(indexes, False)
        if program is False:
            compiled = compile_message(cls.DESCRIPTOR) if protobuf_program is not None else None
            program = None if compiled is None or protobuf_program is None else protobuf_program(compiled)
            self._programs[indexes] = program
        return program, name

    def render_python(self, body: bytes) -> tuple[str, str]:
        """`render` by protobuf's parser and json_format alone (the reference of the compiled renderer)."""
        from google.protobuf import json_format

        indexes, start = message_indexes(body)
        cls, name = self._message_class(tuple(indexes))
        message = cls()
        try:
            message.ParseFromString(body[start:])
        except Exception as e:  # DecodeError, a recursion limit
            raise ProtobufPayloadError(f"the {name} message does not decode ({type(e).__name__}: {e})") from None
        try:
            value = json_format.MessageToDict(message, descriptor_pool=self.pool)
        except Exception as e:  # an Any of a type the schema does not know
            raise ProtobufPayloadError(f"the {name} message has no JSON form ({type(e).__name__}: {e})") from None
        return _ENCODER.encode(value), name

    def _message_class(self, indexes: tuple[int, ...]) -> tuple[Any, str]:
        known = self._classes.get(indexes)
        if known is not None:
            return known
        from google.protobuf import message_factory

        candidates = list(self.file.message_types_by_name.values())
        descriptor = None
        for index in indexes:
            if not 0 <= index < len(candidates):
                raise ProtobufPayloadError(f"the message indexes {list(indexes)} name no message of the schema")
            descriptor = candidates[index]
            candidates = list(descriptor.nested_types)
        assert descriptor is not None
        known = (message_factory.GetMessageClass(descriptor), descriptor.full_name)
        self._classes[indexes] = known
        return known


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=True)


def _compile(schema_text: str, imports: list[tuple[str, str]]) -> bytes:
    """The FileDescriptorSet (imports included) of `schema_text`, by grpcio-tools' protoc, in memfds."""
    import grpc_tools
    from grpc_tools import protoc

    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    fds: list[int] = []
    try:
        def memfd(text: str) -> str:
            fd = os.memfd_create("kfs-proto", os.MFD_CLOEXEC)
            fds.append(fd)
            os.write(fd, text.encode("utf-8"))
            return f"/proc/self/fd/{fd}"

        args = ["protoc", f"-I{MAIN_NAME}={memfd(schema_text)}"]
        for name, text in imports:
            if "=" in name or not name or name.startswith("-"):
                raise ProtobufSchemaError(f"the reference name {name!r} is not an import path")
            args.append(f"-I{name}={memfd(text)}")
        out = os.memfd_create("kfs-proto-out", os.MFD_CLOEXEC)
        fds.append(out)
        args += [f"-I{well_known}", "--include_imports", f"--descriptor_set_out=/proc/self/fd/{out}", MAIN_NAME]
        with _COMPILE_LOCK:
            status = protoc.main(args)
        if status != 0:
            raise ProtobufSchemaError("the schema does not compile as Protobuf (protoc said why on stderr)")
        size = os.fstat(out).st_size
        return os.pread(out, size, 0)
    finally:
        for fd in fds:
            os.close(fd)

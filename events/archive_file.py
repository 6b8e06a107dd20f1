"""An archive file: the stored rows of ended runs, moved out of the ledger table, byte for byte.

gzip (stdlib) of JSON lines: a header line ``{"owlclaw_archive": 1, "agent_id", "period"}``,
then one row per line as the ledger table holds it — ``[stream, version, topic, state,
position, prev_hash, hash]``, the bytes base64 — run by run, each run by version. The state is
kept as stored (JSON, or ciphertext where content is encrypted), so every row's hash recomputes
from the file exactly as from the table (``events.hashchain.row_hash``). Written to a temporary
name, fsynced, renamed and the directory fsynced: a file under its final name is whole. The
gzip header carries no time or name, so the same rows always make the same bytes.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from uuid import UUID

import msgspec

from events.errors import LedgerError
from events.hashchain import Row

FORMAT = 1
"""The layout of an archive file this code writes and reads."""
CHUNK = 1 << 20


class ArchiveUnreadable(LedgerError):
    """An archive file that is missing, or cannot be read as one (named in the message)."""


class Header(msgspec.Struct, frozen=True, kw_only=True):
    owlclaw_archive: int
    agent_id: str
    period: str


class _Row(msgspec.Struct, frozen=True, array_like=True):
    stream: UUID
    version: int
    topic: str
    state: bytes
    position: int
    prev_hash: bytes
    hash: bytes


def write_archive(path: Path, header: Header, rows: Iterable[Row]) -> str:
    """Write ``rows`` to ``path`` durably (replacing an unsealed file of that name); the sha256
    (hex) of the file's bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    encoder = msgspec.json.Encoder()
    with partial.open("wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz:
            gz.write(encoder.encode(header) + b"\n")
            for row in rows:
                gz.write(encoder.encode(_Row(*row)) + b"\n")
        raw.flush()
        os.fsync(raw.fileno())
    partial.replace(path)
    _fsync_dir(path.parent)
    return file_sha256(path)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def read_archive(path: Path) -> tuple[Header, list[Row]]:
    """The header and rows of the archive at ``path``, in file order; ArchiveUnreadable saying
    why not (missing, not gzip, a line that is not a row)."""
    header_decoder = msgspec.json.Decoder(Header)
    row_decoder = msgspec.json.Decoder(_Row)
    rows: list[Row] = []
    try:
        with gzip.open(path, "rb") as gz:
            header = header_decoder.decode(gz.readline())
            if header.owlclaw_archive > FORMAT:
                raise ArchiveUnreadable(
                    f"archive {path} has format {header.owlclaw_archive}; this OwlClaw reads up "
                    f"to {FORMAT}"
                )
            for number, line in enumerate(gz, start=2):
                try:
                    r = row_decoder.decode(line)
                except msgspec.DecodeError as e:
                    raise ArchiveUnreadable(f"archive {path} line {number}: {e}") from e
                rows.append(
                    (r.stream, r.version, r.topic, r.state, r.position, r.prev_hash, r.hash)
                )
    except FileNotFoundError as e:
        raise ArchiveUnreadable(f"archive {path} is missing") from e
    except (OSError, EOFError, gzip.BadGzipFile, msgspec.DecodeError) as e:
        raise ArchiveUnreadable(f"archive {path} cannot be read: {e}") from e
    return header, rows


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

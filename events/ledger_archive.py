"""Archived runs (``ledger.archive``): ended run streams moved out of the ledger table into
compressed files (``events.archive_file``), one per agent and month, each accounted for by an
``ArchiveSealed`` on its agent's stream; and reading them back where their rows are gone.

Moving is crash-safe in three steps, each finished by a re-run: the file is written and
fsynced (a re-run before its seal rewrites it), the seal is committed on the agent's stream
(from here the runs are archived), then the runs' rows are deleted in one transaction, only if
each stream still ends at its archived head (a re-run deletes what a crash left).
"""

from __future__ import annotations

import re
import threading
import time
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import groupby, islice
from pathlib import Path
from uuid import UUID

from eventsourcing.persistence import IntegrityError, Notification, StoredEvent

from events import catalog as ev
from events.agent import Agent
from events.archive_file import ArchiveUnreadable, Header, file_sha256, read_archive, write_archive
from events.archive_seal import archived_runs, merkle_root
from events.codec import topic_of
from events.errors import LedgerError
from events.hashchain import Row, verify_rows
from events.ledger_store import LedgerStore

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
READ_PAGE = 1000
ROWS_BATCH = 500
"""Run streams read per query while looking for what to archive."""
CACHE_ROWS = 500_000
"""Archived rows a process keeps in memory, in whole files (the least recently read dropped
first): a view's rebuild reads the files its log range overlaps batch after batch."""
SEAL_READABLE_S = 60.0
HELD_BACK_POLL_S = 0.005


class ArchiveRefused(LedgerError):
    """Archiving stopped before deleting anything it could not account for (named)."""


@dataclass(frozen=True)
class _File:
    """An archive file's rows, read once its bytes had the sealed sha256, indexed for reads."""

    signature: tuple[int, int, int]
    """(inode, size, mtime) of the file when it was read: a change means reading it again."""
    rows: list[Row]
    """By log position."""
    positions: list[int]
    streams: dict[UUID, list[Row]]
    """Each run's rows, by version."""


@dataclass
class Archived:
    """What one agent's archiving did."""

    agent_id: str
    files: list[str] = field(default_factory=list)
    runs: int = 0
    events: int = 0
    finished: int = 0
    """Runs an earlier, interrupted archiving had sealed whose rows were deleted now."""
    held: int = 0
    """Runs that ended before the date but were left in the table: events of them lie after
    the log position every view has absorbed (the next archiving moves them)."""


class LedgerArchive:
    """Where archived runs are, reading them as if stored, and moving ended runs there."""

    def __init__(
        self,
        store: LedgerStore,
        directory: Path | None,
        load_agent: Callable[[str], Agent],
        commit: Callable[[Agent], tuple[Agent, list[int]]],
    ):
        """``directory``: where archive files are (None: none configured); ``load_agent`` and
        ``commit`` (append, rebasing over other writers): the ledger's, for the seal."""
        self._store = store
        self.directory = directory
        self._load_agent = load_agent
        self._commit = commit
        self._lock = threading.Lock()
        self._seals: dict[UUID, ev.ArchiveSealed] = {}
        """Run stream -> the seal of the archive holding it, as read so far."""
        self._sealed: dict[str, ev.ArchiveSealed] = {}
        """File -> its seal, as read so far."""
        self._scanned = 0
        """The log position up to which ArchiveSealed events are in ``_seals``."""
        self._files: OrderedDict[tuple[str, str], _File] = OrderedDict()
        """(file, sealed sha256) -> its rows, least recently read first."""
        self._cached_rows = 0

    # --- reading ------------------------------------------------------------------------------

    def seal_of(self, run_id: UUID) -> ev.ArchiveSealed | None:
        """The ArchiveSealed of the archive holding ``run_id``, None if it is not archived."""
        with self._lock:
            if run_id not in self._seals:
                self._scan()
            return self._seals.get(run_id)

    def _scan(self) -> None:
        """Read the ArchiveSealed events committed since the last scan (in the database, from
        its index on log position: the scan covers only what is new)."""
        head = self._store.recorder.max_notification_id() or 0
        while self._scanned < head:
            page = self._store.recorder.select_notifications(
                start=self._scanned,
                limit=READ_PAGE,
                stop=head,
                topics=[topic_of(ev.ArchiveSealed)],
                inclusive_of_start=False,
            )
            for n in page:
                seal = self._store.decode(n, n.id)
                assert isinstance(seal, ev.ArchiveSealed)
                self._know(seal)
            self._scanned = page[-1].id if len(page) == READ_PAGE else head

    def _know(self, seal: ev.ArchiveSealed) -> None:
        self._seals.update({r.run_id: seal for r in seal.runs})
        self._sealed[seal.file] = seal

    def stored_events(self, run_id: UUID) -> list[StoredEvent]:
        """The archived events of ``run_id`` as they were stored (none if not archived)."""
        return [
            StoredEvent(originator_id=s, originator_version=v, topic=t, state=state)
            for s, v, t, state, _, _, _ in self.rows(run_id)
        ]

    def rows(self, run_id: UUID) -> list[Row]:
        """The archived rows of ``run_id`` with their hashes (none if not archived)."""
        seal = self.seal_of(run_id)
        if seal is None:
            return []
        return list(self._file(seal).streams.get(run_id, ()))

    def notifications(
        self, run_ids: Sequence[UUID], after: int, limit: int | None
    ) -> list[Notification]:
        """The archived events of ``run_ids`` after log position ``after``, in log order: the
        first ``limit`` of them (None: all)."""
        wanted = set(run_ids)
        with self._lock:  # one scan for them all: most of an agent's runs are not archived
            self._scan()
            seals = {s.file: s for r in run_ids if (s := self._seals.get(r)) is not None}
        found: list[Row] = []
        for seal in sorted(seals.values(), key=lambda s: s.first_position):
            if seal.last_position <= after:
                continue
            if limit is not None and len(found) >= limit and seal.first_position > found[-1][4]:
                break
            streams = self._file(seal).streams
            found += [r for run in wanted for r in streams.get(run, ()) if r[4] > after]
            found.sort(key=lambda r: r[4])
            if limit is not None:
                found = found[:limit]
        return [_notification(r) for r in found]

    def in_log(
        self, after: int, up_to: int | None, topics: Collection[str], limit: int
    ) -> list[Notification]:
        """The archived events at log positions after ``after`` and at most ``up_to`` (None: no
        bound), of ``topics`` (empty: any), in log order: the first ``limit``. The seals are
        brought up to date first (one look at the log for new ones); only the files whose
        sealed positions the range overlaps are read."""
        with self._lock:
            self._scan()
            seals = [
                s
                for s in self._sealed.values()
                if s.last_position > after and (up_to is None or s.first_position <= up_to)
            ]
        found: list[Row] = []
        for seal in seals:
            file = self._file(seal)
            start = bisect_right(file.positions, after)
            stop = len(file.rows) if up_to is None else bisect_right(file.positions, up_to)
            wanted = (file.rows[i] for i in range(start, stop))
            found += islice((r for r in wanted if not topics or r[2] in topics), limit)
        found.sort(key=lambda r: r[4])
        return [_notification(r) for r in found[:limit]]

    def _file(self, seal: ev.ArchiveSealed) -> _File:
        """The rows of ``seal``'s file, refused (ArchiveUnreadable) unless its bytes are the
        sealed ones: a reader never gets an altered archive. Kept in memory (``CACHE_ROWS``)
        and read and checked again once the file's inode, size or mtime changes."""
        path = self.path(seal)
        try:
            st = path.stat()
        except OSError as e:
            raise ArchiveUnreadable(f"archive {path} is missing or unreadable: {e}") from e
        signature = (st.st_ino, st.st_size, st.st_mtime_ns)
        key = (seal.file, seal.sha256)
        with self._lock:
            cached = self._files.get(key)
            if cached is not None and cached.signature == signature:
                self._files.move_to_end(key)
                return cached
        _, rows = read_archive(path)
        digest = file_sha256(path)
        if digest != seal.sha256:
            raise ArchiveUnreadable(
                f"archive {path} was altered (sha256 {digest}, sealed {seal.sha256}): run "
                "`owlclaw verify` to find what changed"
            )
        rows.sort(key=lambda r: r[4])
        streams: dict[UUID, list[Row]] = {}
        for r in rows:
            streams.setdefault(r[0], []).append(r)
        file = _File(signature, rows, [r[4] for r in rows], streams)
        with self._lock:
            stale = self._files.pop(key, None)
            self._cached_rows += len(rows) - (len(stale.rows) if stale else 0)
            self._files[key] = file
            while self._cached_rows > CACHE_ROWS and len(self._files) > 1:
                _, dropped = self._files.popitem(last=False)
                self._cached_rows -= len(dropped.rows)
        return file

    def path(self, seal: ev.ArchiveSealed) -> Path:
        return self._require_directory() / seal.file

    def _require_directory(self) -> Path:
        if self.directory is None:
            raise ArchiveUnreadable(
                "this ledger has archived runs, but no archive directory is configured "
                "([ledger] archive_dir)"
            )
        return self.directory

    # --- moving -------------------------------------------------------------------------------

    def archive_agent(self, agent_id: str, before: datetime, absorbed: int) -> Archived:
        """Move ``agent_id``'s runs that ended before ``before`` into archive files, one per
        month they ended in; first finish what an interrupted archiving sealed. Only runs whose
        events all lie at or below log position ``absorbed`` (what every view has absorbed:
        ``projections.absorbed``) move; the others are counted in ``held``."""
        self._require_directory()
        recorder = self._store.postgres()
        agent = self._load_agent(agent_id)
        own = self._store.stream(agent.id)
        seals = [e for e in own if isinstance(e, ev.ArchiveSealed)]
        done = Archived(agent_id)
        for seal in seals:
            done.finished += self._delete(seal)
        archived = {r.run_id for s in seals for r in s.runs}
        sealed = {e.run_id: e for e in own if isinstance(e, ev.RunSealed)}
        run_nos = {run_id: n for n, run_id in enumerate(agent.run_ids(), 1)}
        periods: dict[str, list[Row]] = {}
        candidates = [r for r in run_nos if r not in archived]
        for start in range(0, len(candidates), ROWS_BATCH):
            batch = recorder.chain_rows(candidates[start : start + ROWS_BATCH])
            for run_id, group in groupby(batch, key=lambda r: r[0]):
                rows = list(group)
                run_no = run_nos[run_id]
                period = self._ended_in(agent_id, run_no, rows, sealed.get(run_id), before)
                if period is None:
                    continue
                if rows[-1][4] > absorbed:
                    done.held += 1
                else:
                    periods.setdefault(period, []).extend(rows)
        for period, rows in sorted(periods.items()):
            number = 1 + sum(s.period == period for s in seals)
            name = f"{_file_stem(agent_id, agent.id)}/{period}.{number}.jsonl.gz"
            digest = write_archive(
                self._require_directory() / name,
                Header(owlclaw_archive=1, agent_id=agent_id, period=period),
                rows,
            )
            runs = archived_runs(rows, run_nos)
            agent.record(
                ev.ArchiveSealed,
                file=name,
                sha256=digest,
                period=period,
                runs=runs,
                root=merkle_root(runs),
                first_position=min(r[4] for r in rows),
                last_position=max(r[4] for r in rows),
            )
            agent, positions = self._commit(agent)  # the seal alone: it is the last event
            self._until_readable(name, positions[-1])
            [stored] = recorder.select_events(agent.id, gt=agent.version - 1)
            committed = self._store.decode(stored)
            assert isinstance(committed, ev.ArchiveSealed)
            seals.append(committed)
            self._delete(committed)
            done.files.append(name)
            done.runs += len(runs)
            done.events += len(rows)
        return done

    def _ended_in(
        self,
        agent_id: str,
        run_no: int,
        rows: list[Row],
        seal: ev.RunSealed | None,
        before: datetime,
    ) -> str | None:
        """The month (``YYYY-MM``) the run ended in if that was before ``before`` (None: not
        ended, or later); ArchiveRefused if its chain is broken or it differs from its seal."""
        label = f"agent {agent_id} run {run_no}"
        stream, version, topic, state, _, _, hash_ = rows[-1]
        last = self._store.decode(
            StoredEvent(originator_id=stream, originator_version=version, topic=topic, state=state)
        )
        if not isinstance(last, ev.RunEnded) or last.timestamp >= before:
            return None
        if breaks := verify_rows(rows).breaks:
            raise ArchiveRefused(f"{label} is not archived: its chain is broken: {breaks[0]}")
        if seal is not None and (seal.version, seal.hash) != (version, hash_.hex()):
            raise ArchiveRefused(
                f"{label} is not archived: it ends at version {version}, sealed at "
                f"{seal.version} (RunSealed at agent version {seal.originator_version})"
            )
        return last.timestamp.strftime("%Y-%m")

    def _until_readable(self, name: str, position: int) -> None:
        """Wait until readers of the log see the seal at ``position`` (an older transaction
        still open holds it back): a reader that finds a run's rows gone then finds its seal
        (``in_log``). Rows are kept if that takes longer than ``SEAL_READABLE_S``."""
        deadline = time.monotonic() + SEAL_READABLE_S
        while (self._store.recorder.max_notification_id() or 0) < position:
            if time.monotonic() > deadline:
                raise ArchiveRefused(
                    f"{name}: its seal (log position {position}) is still held back from "
                    f"readers after {SEAL_READABLE_S:g} s: rows kept; run again to delete them"
                )
            time.sleep(HELD_BACK_POLL_S)

    def _delete(self, seal: ev.ArchiveSealed) -> int:
        """Delete the rows of ``seal``'s runs that are still in the table, once its file is
        there with the sealed bytes; how many runs still had rows."""
        heads = {r.run_id: (r.version, bytes.fromhex(r.hash)) for r in seal.runs}
        recorder = self._store.postgres()
        present = recorder.stream_heads(list(heads))
        if not present:
            with self._lock:
                self._know(seal)
            return 0
        path = self.path(seal)
        if not path.is_file() or file_sha256(path) != seal.sha256:
            raise ArchiveRefused(
                f"{path} is missing or altered, while ArchiveSealed at agent version "
                f"{seal.originator_version} accounts for its runs: their rows are kept; "
                "restore the file and run again"
            )
        try:
            recorder.delete_streams(heads)
        except IntegrityError as e:
            raise ArchiveRefused(f"{seal.file}: rows not deleted: {e}") from e
        with self._lock:
            self._know(seal)
        return len(present)


def _notification(row: Row) -> Notification:
    stream, version, topic, state, position, _, _ = row
    return Notification(
        id=position, originator_id=stream, originator_version=version, topic=topic, state=state
    )


def _file_stem(agent_id: str, agent_stream: UUID) -> str:
    """The agent's directory under the archive directory: its id where that is a safe file
    name (the ids apps have), else its stream id."""
    return agent_id if SAFE_NAME.fullmatch(agent_id) else str(agent_stream)

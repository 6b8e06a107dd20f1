"""The ledger: one eventsourcing application holding every agent's Agent and Run streams.

One application means one globally ordered notification log, which projections, the timer
service and analytics jobs consume. Appends carry their expected version (the primary key on
(stream, version)), so a second writer of a stream gets ``StreamConflict`` instead of forking it.

The class is synchronous like eventsourcing; async callers run it in one worker thread per agent.

``Ledger(database_url)`` is the PostgreSQL ledger; ``Ledger.in_memory()`` is the same API on
eventsourcing's in-memory (POPO) recorders, for fast tests that need no read models.

A ``Ledger`` itself is the agents' streams: append, seal, register, load. Its other parts are
attributes, each in its own module: ``log`` (the global log, ``events.ledger_log``), ``chains``
(hash chains and anchors, ``events.ledger_chains``), ``database`` (the PostgreSQL side,
``events.ledger_database``), ``archive`` (runs moved to archive files, read back where their
rows are gone, ``events.ledger_archive``), ``resumable`` (what a restarted host picks up,
``events.ledger_resumable``) and ``blobs`` (payloads events refer to by sha256, ``events.blobs``).
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import (
    IntegrityError,
    PersistenceError,
)

from events import catalog as ev
from events.agent import Agent
from events.aggregate import projector
from events.blobs import LedgerBlobs
from events.catalog import LedgerEvent
from events.codec import LedgerDecodeError, MsgspecMapper
from events.errors import (
    LedgerReadError,
    LedgerUnavailable,
    StreamConflict,
    UnknownAgent,
    UnknownRun,
)
from events.hashchain import row_hash
from events.heads import (
    chain_runs,
    known_hash,
)
from events.key_table import PostgresKeyStore
from events.keys import DataKey, InMemoryKeyStore
from events.ledger_archive import LedgerArchive
from events.ledger_chains import LedgerChains
from events.ledger_database import LedgerDatabase
from events.ledger_log import LedgerLog, LoggedEvent
from events.ledger_resumable import ResumableRuns
from events.ledger_store import LedgerStore
from events.memory_recorder import InMemoryRecorder
from events.postgres import postgres_env
from events.recorder import OwlClawApplicationRecorder
from events.redaction import KnownSecrets, Redactor
from events.run import Run
from events.sealing import Sealer
from events.streams import agent_stream_id, now

MAX_REBASES = 10
REGISTER_BATCH = 1000
"""Agents registered per commit by ``register_agents``."""
_AGENT_PROJECTOR = projector(Agent)
_RUN_PROJECTOR = projector(Run)


class _LedgerApplication(Application[UUID]):
    name = "Ledger"

    def construct_mapper(self) -> MsgspecMapper:
        return MsgspecMapper()


POOL_SIZE = 5
MAX_OVERFLOW = 10
"""A ledger's connection pool: ``POOL_SIZE`` kept open, up to ``MAX_OVERFLOW`` more under load
(owlclaw/connections.py counts them in the server's connection budget)."""
CONNECTIONS = POOL_SIZE + MAX_OVERFLOW
"""The most connections a ledger with the default pool opens at once."""


class Ledger:
    """Append to and read from the agents' streams; its ``log``, ``chains``, ``database``,
    ``resumable`` runs and ``blobs`` are parts of their own."""

    def __init__(
        self,
        database_url: str,
        *,
        snapshot_interval: int = 100,
        pool_size: int = POOL_SIZE,
        idle_in_transaction_s: int = 5,
        archive_dir: Path | None = None,
        encrypt: bool = True,
    ):
        """``idle_in_transaction_s``: how long PostgreSQL lets a transaction of this ledger's
        pool (its views' included) sit idle before it ends it; ``archive_dir``: where its
        archived runs' files are (``events.ledger_archive``); ``encrypt``: seal new content
        under data keys (``events.sealing``; sealed content is read either way)."""
        env = {
            **postgres_env(database_url),
            "PERSISTENCE_MODULE": "events.recorder:OwlClawFactory",
            "POSTGRES_POOL_SIZE": str(pool_size),
            "POSTGRES_MAX_OVERFLOW": str(MAX_OVERFLOW),
            "POSTGRES_IDLE_IN_TRANSACTION_SESSION_TIMEOUT": str(idle_in_transaction_s),
            "POSTGRES_CONNECT_TIMEOUT": "5",
            "IS_SNAPSHOTTING_ENABLED": "y",
            "CREATE_TABLE": "y",
        }
        try:
            self._open(env, snapshot_interval, archive_dir, encrypt)
        except PersistenceError as e:
            raise LedgerUnavailable(f"cannot open the ledger: {e}") from e

    @classmethod
    def in_memory(
        cls, *, snapshot_interval: int = 100, archive_dir: Path | None = None, encrypt: bool = True
    ) -> Ledger:
        """A ledger held in this process only: the same API, no database behind it."""
        ledger = cls.__new__(cls)
        env = {
            "PERSISTENCE_MODULE": "events.memory_recorder:InMemoryFactory",
            "IS_SNAPSHOTTING_ENABLED": "y",
        }
        ledger._open(env, snapshot_interval, archive_dir, encrypt)
        return ledger

    def _open(
        self, env: dict[str, str], snapshot_interval: int, archive_dir: Path | None, encrypt: bool
    ) -> None:
        self._app = _LedgerApplication(env=env)
        recorder = self._app.recorder
        assert isinstance(recorder, OwlClawApplicationRecorder | InMemoryRecorder)
        mapper = self._app.mapper
        assert isinstance(mapper, MsgspecMapper)
        self._mapper = mapper
        keys = (
            PostgresKeyStore(recorder.datastore)
            if isinstance(recorder, OwlClawApplicationRecorder)
            else InMemoryKeyStore()
        )
        self.sealer = Sealer(keys, encrypt=encrypt)
        """Seals content under data keys (``events.sealing``): the views store what it seals."""
        self._mapper.sealer = self.sealer
        self._secrets = KnownSecrets()
        self._store = LedgerStore(recorder, self._mapper)
        self.snapshot_interval = snapshot_interval
        self.archive = LedgerArchive(
            self._store, archive_dir, self.load_agent, self.append_rebasing
        )
        self.log = LedgerLog(self._store, self.archive)
        self.database = LedgerDatabase(self._store)
        self.chains = LedgerChains(self._store, self.append_events, self.archive.rows)
        self.resumable = ResumableRuns(self._store, self.load_run, self.archive.seal_of)
        self.blobs = LedgerBlobs(self._store)

    # --- writing ------------------------------------------------------------------------------

    def redact(self, secrets: Mapping[str, str]) -> Redactor:
        """Replace these secrets' values (name -> value) too, with ``[redacted:NAME]``, in every
        event stored from now on, whoever records it (``events.redaction``). Returns the
        redactor now in use: its ``too_short`` names the values it cannot redact."""
        self._mapper.redactor = self._secrets.add(secrets)
        return self._mapper.redactor

    @property
    def redactor(self) -> Redactor:
        """What every event stored is redacted with now: what a run shows its model goes
        through it too, so the model sees what is recorded."""
        return self._mapper.redactor

    def append(self, *aggregates: Agent | Run) -> list[int]:
        """Commit the pending events of ``aggregates`` in one transaction; return positions."""
        events = [e for agg in aggregates for e in agg.collect_events()]
        if not events:
            return []
        return self.append_events(events, aggregates)

    def append_events(
        self, events: Sequence[LedgerEvent], aggregates: Sequence[Agent | Run] = ()
    ) -> list[int]:
        """Commit ``events`` in one transaction; return positions. They go to the application's
        event store directly: ``Application.save`` tells events from aggregates by checking
        each against eventsourcing's runtime protocols (~9 µs an event, a tenth of a ms a run)
        and serves an aggregate cache and snapshot intervals this ledger does not use."""
        try:
            recordings = self._app.events.put(events)
        except IntegrityError as e:
            streams = sorted({f"{x.originator_id}@{x.originator_version}" for x in events})
            raise StreamConflict(
                f"cannot append at {', '.join(streams)}: another writer appended first, or "
                f"this writer's earlier append failed ({e})"
            ) from e
        except (PersistenceError, OSError) as e:
            raise self._store.unavailable(
                f"append of {len(events)} event(s) failed, database unreachable: {e}",
                committed=self._was_committed(events),
            ) from e
        chain_runs(aggregates, [r.notification for r in recordings])
        self._snapshot_if_due(events, aggregates)
        return [r.notification.id for r in recordings]

    def append_rebasing(
        self,
        agent: Agent,
        *runs: Run,
        over: tuple[type[LedgerEvent], ...] | None = None,
        ours: Container[int] = (),
    ) -> tuple[Agent, list[int]]:
        """Commit ``agent`` and ``runs`` together; when another writer appended to the agent's
        stream first, re-record this writer's agent events on top of the stream as it is now
        and try again. Returns the (possibly reloaded) agent and the log positions.

        ``over``: the event types of other writers this writer's facts commute with (None: any).
        ``ours``: agent-stream versions this writer committed itself (a host accepting a run while
        the agent's previous run is between steps): its own facts are ordered by it and commute.
        A commit whose only agent events are RunSealed or ArchiveSealed commutes with anything
        (a seal states run streams' heads, not the agent's state), even with versions this
        writer lost in a failed commit: so a run a fenced writer ends (``stand_down``) is sealed
        too. Anything else in between (another runtime queued a run, a fire was recorded) is a real
        conflict and raises StreamConflict, as does any conflict on a run stream (one writer).
        """
        agent_events = agent.collect_events()
        run_events = [e for run in runs for e in run.collect_events()]
        for _ in range(MAX_REBASES):
            try:
                return agent, self.append_events(agent_events + run_events, (agent, *runs))
            except StreamConflict:
                if not agent_events:
                    raise
                # Judged on exactly the events the rebase goes on top of: read after loading,
                # up to the loaded version, so one another writer appends meanwhile is either
                # judged here or makes the next try conflict (never re-recorded over unseen).
                current = self.load_agent(agent.agent_id)
                base = agent_events[0].originator_version - 1
                others = self.agent_events_at(current, range(base + 1, current.version + 1))
                seals_only = all(
                    isinstance(e, ev.RunSealed | ev.ArchiveSealed) for e in agent_events
                )
                if not seals_only and (
                    not others
                    or (
                        over is not None
                        and not all(
                            isinstance(e, over) or e.originator_version in ours for e in others
                        )
                    )
                ):
                    raise
                for e in agent_events:
                    current.record_again(e)
                agent, agent_events = current, current.collect_events()
        raise StreamConflict(f"agent {agent.agent_id}: still conflicting after {MAX_REBASES} tries")

    def seal(self, agent: Agent, run: Run) -> ev.RunSealed:
        """Record on ``agent`` (pending) the head ``run``'s stream will have once its pending
        events commit: to commit in the same transaction as the run's end.

        The hash the SQL append will store is computed here from the same inputs: the stored
        hash before the pending events (``run.head``, or read back), and each pending event's
        topic and state as the mapper stores them (``prepare``: the append then stores those very
        bytes) through ``row_hash``. Reading it back after the commit instead would need a second
        commit, and a crash between the two would leave an ended run unsealed."""
        pending = run.pending_events
        if not pending:
            raise ValueError(f"run {run.id} has no pending events to seal")
        before = pending[0].originator_version - 1
        previous = known_hash(run, before)
        if previous is None:
            previous = self.chains.event_hashes([(run.id, before)]).get((run.id, before))
        if previous is None:
            raise StreamConflict(f"run {run.id}: version {before} is not stored, cannot seal")
        for event in pending:
            stored = self._mapper.prepare(event)
            previous = row_hash(
                previous, run.id, stored.originator_version, stored.topic, stored.state
            )
        sealed = agent.record(
            ev.RunSealed,
            run_id=run.id,
            run_no=run.state.run_no,
            version=run.version,
            hash=previous.hex(),
        )
        assert isinstance(sealed, ev.RunSealed)
        return sealed

    def _snapshot_if_due(
        self, events: Sequence[LedgerEvent], aggregates: Sequence[Agent | Run]
    ) -> None:
        """Snapshot an Agent whose version crossed a multiple of the interval.

        eventsourcing only snapshots when an event's version is an exact multiple and it knows
        the aggregate; a batch can jump past a multiple, so this checks the crossing itself.
        """
        for agent in aggregates:
            if not isinstance(agent, Agent):
                continue
            first = min(
                (e.originator_version for e in events if e.originator_id == agent.id), default=None
            )
            if first is None:
                continue
            if agent.version // self.snapshot_interval > (first - 1) // self.snapshot_interval:
                snapshots = self._app.snapshots
                assert snapshots is not None
                snapshots.put([Agent.Snapshot.take(agent)])

    def _was_committed(self, events: Sequence[LedgerEvent]) -> bool | None:
        """After a failed append, look (once) whether its last event is in the ledger."""
        last = events[-1]
        return self._store.recorder.has_event_once(last.originator_id, last.originator_version)

    # --- agents and runs ----------------------------------------------------------------------

    def register_agent(self, agent_id: str, app_dir: str = "", **sub_agent: Any) -> Agent:
        """Create the agent's stream, and its data key first (idempotent: an existing agent is
        returned as loaded). ``sub_agent``: a sub-agent's parent_agent_id, depth and tools
        (AgentRegistered)."""
        try:
            return self.load_agent(agent_id)
        except UnknownAgent:
            pass
        agent = Agent.blank(agent_stream_id(agent_id))
        self.sealer.make_key(DataKey("agent", agent.id, agent.id))
        agent.record(ev.AgentRegistered, agent_id=agent_id, app_dir=app_dir, **sub_agent)
        try:
            self.append(agent)
        except StreamConflict:
            return self.load_agent(agent_id)
        return agent

    def register_agents(self, agent_ids: Sequence[str], app_dir: str = "") -> int:
        """Register many agents, REGISTER_BATCH per commit; how many were new (those already
        registered are left as they are, like ``register_agent``). A batch that races another
        registration of one of its agents is looked at again and retried."""
        new = 0
        for start in range(0, len(agent_ids), REGISTER_BATCH):
            batch = {agent_stream_id(a): a for a in agent_ids[start : start + REGISTER_BATCH]}
            for _ in range(MAX_REBASES):
                registered = self.chains.stream_heads(list(batch))
                events = [
                    ev.AgentRegistered(
                        originator_id=stream,
                        originator_version=1,
                        timestamp=now(),
                        agent_id=agent_id,
                        app_dir=app_dir,
                    )
                    for stream, agent_id in batch.items()
                    if stream not in registered
                ]
                if not events:
                    break
                for e in events:
                    self.sealer.make_key(DataKey("agent", e.originator_id, e.originator_id))
                try:
                    self.append_events(events)
                except StreamConflict:
                    continue
                new += len(events)
                break
            else:
                raise StreamConflict(f"registering agents: still conflicting after {MAX_REBASES}")
        return new

    def attach_app(self, agent_id: str, app_dir: str) -> Agent:
        """Register the agent with ``app_dir``, or record AppAttached if it was served from
        another directory (commutes with the agent's own appends)."""
        agent = self.register_agent(agent_id, app_dir)
        if agent.state.app_dir == app_dir:
            return agent
        agent.record(ev.AppAttached, app_dir=app_dir, previous=agent.state.app_dir)
        return self.append_rebasing(agent)[0]

    def require_agent(self, agent_id: str) -> None:
        """Raise UnknownAgent unless the agent is registered: a look at its stream's head (see
        ``chains.stream_head``), not a load of the agent, for callers that hand it to its actor."""
        if self.chains.stream_head(agent_stream_id(agent_id)) is None:
            raise UnknownAgent(agent_id)

    def load_agent(self, agent_id: str) -> Agent:
        """The agent's current state: its latest snapshot plus the events after it."""
        try:
            agent: object = self._app.repository.get(
                agent_stream_id(agent_id), projector_func=_AGENT_PROJECTOR
            )
        except AggregateNotFoundError:
            raise UnknownAgent(agent_id) from None
        except LedgerDecodeError as e:
            raise LedgerReadError(e, None) from e
        except PersistenceError as e:
            raise self._store.unavailable(f"cannot load agent {agent_id!r}: {e}") from e
        assert isinstance(agent, Agent)
        return agent

    def agent_events_at(self, agent: Agent, versions: Sequence[int]) -> list[LedgerEvent]:
        """The agent-stream events at ``versions`` (one range read), in stream order."""
        if not versions:
            return []
        wanted = set(versions)
        stored = self._store.recorder.select_events(agent.id, gt=min(wanted) - 1, lte=max(wanted))
        return self._store.decode_all([s for s in stored if s.originator_version in wanted])

    def load_run(self, run_id: UUID) -> Run:
        try:
            run: object = self._app.repository.get(run_id, projector_func=_RUN_PROJECTOR)
        except AggregateNotFoundError:
            archived = self.archive.stored_events(run_id)
            if not archived:
                raise UnknownRun(f"unknown run {run_id}") from None
            run = _RUN_PROJECTOR(None, self._store.decode_all(archived))
        except LedgerDecodeError as e:
            raise LedgerReadError(e, None) from e
        assert isinstance(run, Run)
        return run

    def list_runs(self, agent_id: str) -> list[UUID]:
        return self.load_agent(agent_id).run_ids()

    def stream(self, stream_id: UUID) -> list[LedgerEvent]:
        """All events of one stream, in version order: an archived run's from its archive."""
        events = self._store.stream(stream_id)
        if events:
            return events
        return self._store.decode_all(self.archive.stored_events(stream_id))

    def agent_history(
        self, agent_id: str, after: int = 0, limit: int | None = None
    ) -> list[LoggedEvent]:
        """The agent's stream and all its runs' streams, merged in global log order: the events
        after log position ``after``, at most ``limit`` of them (None: all)."""
        agent = self.load_agent(agent_id)
        streams = [agent.id, *agent.run_ids()]
        rows = self._store.recorder.select_stream_notifications(streams, after, limit)
        archived = self.archive.notifications(agent.run_ids(), after, limit)
        if archived:
            rows = sorted([*rows, *archived], key=lambda n: n.id)[:limit]
        return self.log.logged(rows)

    def agent_ids(self) -> list[str]:
        """Every registered agent, in registration order."""
        ids, after = [], 0
        while page := self.log.read(after, types=[ev.AgentRegistered]):
            ids += [e.event.agent_id for e in page if isinstance(e.event, ev.AgentRegistered)]
            after = page[-1].position
        return ids

    def close(self) -> None:
        if isinstance(self._store.recorder, OwlClawApplicationRecorder):
            self._store.recorder.close_notifier()
        self._app.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""What both aggregates share: events applied through a handler map checked at class definition.

Aggregates are plain objects whose state is a msgspec Struct (so a snapshot is that Struct).
They change only by applying events: ``record`` builds the next event of the stream, applies it
and keeps it pending until the ledger commits it. Each aggregate maps every event class of its
stream to its handler, or lists it as ignored, checked when the class is defined: an event added
to the catalog, or renamed, cannot silently stop changing state. Its own module so that
``events.agent`` and ``events.run`` each hold one aggregate.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, ClassVar, Self, TypeVar
from uuid import UUID

from events import catalog as ev
from events.catalog import LedgerEvent, Stream
from events.streams import now

_HEADER = {"originator_id", "originator_version", "timestamp"}
"""Fields every event has; the rest are its own."""

Handler = Callable[[Any, Any], None]
"""An aggregate's method applying one event class to its state: (aggregate, event)."""


def stream_events(stream: Stream) -> frozenset[type[LedgerEvent]]:
    """The event classes of ``events.catalog`` that belong to ``stream``."""
    return frozenset(
        c for c in ev.EVENT_TYPES.values() if c.__module__ == ev.__name__ and c.stream == stream
    )


def check_handlers(
    name: str,
    stream: Stream,
    handlers: Mapping[type[LedgerEvent], Handler],
    ignored: Collection[type[LedgerEvent]],
) -> None:
    """Raise TypeError unless the aggregate ``name`` handles or ignores exactly the catalog's
    events of its ``stream``, each once."""
    expected = stream_events(stream)
    for event in [*handlers, *ignored]:
        if event not in ev.EVENT_TYPES.values() or event.__module__ != ev.__name__:
            raise TypeError(f"{name} maps {event!r}, which is not an event of events.catalog")
        if event not in expected:
            raise TypeError(
                f"{name} maps {event.__name__}, an event of the {event.stream} stream, "
                f"not of the {stream} stream"
            )
    if both := set(handlers) & set(ignored):
        names = ", ".join(sorted(c.__name__ for c in both))
        raise TypeError(f"{name} both handles and ignores {names}")
    if missing := expected - set(handlers) - set(ignored):
        names = ", ".join(sorted(c.__name__ for c in missing))
        raise TypeError(
            f"{name} has no handler for {names} of its {stream} stream: map it in "
            f"{name}.handlers, or list it in {name}.ignored if it changes no state"
        )


class Aggregate:
    stream: ClassVar[Stream]
    Snapshot: ClassVar[type[Any]]
    handlers: ClassVar[Mapping[type[LedgerEvent], Handler]]
    """Event class -> the method that applies it to the state."""
    ignored: ClassVar[frozenset[type[LedgerEvent]]]
    """Events of the stream that change nothing here (views and audit read them)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_handlers(cls.__name__, cls.stream, cls.handlers, cls.ignored)

    def __init__(self, stream_id: UUID, state: Any, version: int = 0):
        self.id = stream_id
        self.version = version
        self.state = state
        self._pending: list[LedgerEvent] = []

    @classmethod
    def blank(cls, stream_id: UUID) -> Self:
        raise NotImplementedError

    def record(self, event_class: type[LedgerEvent], **fields: Any) -> LedgerEvent:
        """Create the next event of this stream, apply it, and keep it for the next commit."""
        if event_class.stream != self.stream:
            raise TypeError(f"{event_class.__name__} belongs to the {event_class.stream} stream")
        event = event_class(
            originator_id=self.id,
            originator_version=self.version + 1,
            timestamp=now(),
            **fields,
        )
        self.apply(event)
        self._pending.append(event)
        return event

    def record_again(self, event: LedgerEvent) -> LedgerEvent:
        """Record the fact ``event`` states once more, as this stream's next event: a writer
        rebasing its events on top of another writer's (``Ledger.append_rebasing``)."""
        fields = {f: getattr(event, f) for f in event.__struct_fields__ if f not in _HEADER}
        return self.record(type(event), **fields)

    def apply(self, event: LedgerEvent) -> None:
        handler = self.handlers.get(type(event))
        if handler is not None:
            handler(self, event)
        elif type(event) not in self.ignored:
            raise TypeError(f"{type(self).__name__} does not apply {type(event).__name__}")
        self.version = event.originator_version

    @property
    def pending_events(self) -> list[LedgerEvent]:
        """Recorded events not yet committed."""
        return list(self._pending)

    def collect_events(self) -> list[LedgerEvent]:
        pending, self._pending = self._pending, []
        return pending


A = TypeVar("A", bound=Aggregate)


def projector(cls: type[A]) -> Callable[[A | None, Iterable[Any]], A | None]:
    """eventsourcing's projector for ``cls``: a snapshot restores the state, events apply."""

    snapshot = getattr(cls, "Snapshot", None)

    def project(aggregate: A | None, events: Iterable[Any]) -> A | None:
        for event in events:
            if snapshot is not None and isinstance(event, snapshot):
                aggregate = event.restore()
                continue
            if aggregate is None:
                aggregate = cls.blank(event.originator_id)
            aggregate.apply(event)
        return aggregate

    return project

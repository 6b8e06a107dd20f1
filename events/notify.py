"""Wake-ups of the ledger's readers: NOTIFY after commits, LISTEN with a watermark-aware pull.

The recorder commits without NOTIFY (it would serialize commits on PostgreSQL's notify lock), so
waking readers is a job of its own: a background notifier that coalesces NOTIFYs after commits,
and a subscription that also re-reads while the recorder's watermark holds committed rows back.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol, runtime_checkable

import psycopg
from eventsourcing.postgres import PostgresDatastore, PostgresSubscription
from psycopg.sql import SQL

from events.postgres import connect_kwargs


@runtime_checkable
class HoldsBack(Protocol):
    """A recorder that tells whether its watermark holds committed rows back."""

    def is_held_back(self, after: int) -> bool: ...


class WatermarkSubscription(PostgresSubscription):
    """LISTEN/NOTIFY subscription that also re-reads while the watermark holds rows back.

    A commit can become readable without a notification: when the transaction that held the
    watermark back was not a ledger writer. Only in that state does the puller poll, briefly.
    """

    HELD_BACK_POLL_SECONDS = 0.005
    LOST_WAKEUP_POLL_SECONDS = 1.0
    """A writer killed between its commit and its NOTIFY leaves no wake-up; re-read this often."""

    def _loop_on_pull(self) -> None:
        recorder = self._recorder
        assert isinstance(recorder, HoldsBack)
        try:
            self._pull()
            while not self._has_been_stopped:
                held = recorder.is_held_back(self._last_notification_id or 0)
                self._has_been_notified.wait(
                    self.HELD_BACK_POLL_SECONDS if held else self.LOST_WAKEUP_POLL_SECONDS
                )
                self._pull()
        except BaseException as e:
            if self._thread_error is None:
                self._thread_error = e
            self.stop()


class Notifier:
    """Sends coalesced, asynchronous-commit NOTIFYs after ledger commits.

    It has a connection of its own, so writers never wait for it.
    """

    MIN_INTERVAL_SECONDS = 0.025
    """After a quiet spell the first commit is notified at once; under sustained writes each
    process notifies at most this often. Every NOTIFY is a transaction taking PostgreSQL's
    global notify lock: at 10 ms, 8 busy writer processes spent ~6 % of the machine on them."""

    def __init__(self, datastore: PostgresDatastore, channel: str):
        self._connect_kwargs = connect_kwargs(datastore)
        self._statement = SQL(
            "SELECT set_config('synchronous_commit', 'off', true), pg_notify({0}, '')"
        ).format(channel)
        self._wanted = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def poke(self) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None and not self._closed:
                    self._thread = threading.Thread(
                        target=self._run, name="owlclaw-ledger-notifier", daemon=True
                    )
                    self._thread.start()
        self._wanted.set()

    def close(self) -> None:
        """Stop after one last NOTIFY, which covers commits made since the previous one."""
        self._closed = True
        self._wanted.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        while True:
            self._wanted.wait()
            final = self._closed
            self._wanted.clear()
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(**self._connect_kwargs, autocommit=True)
                conn.execute(self._statement)
            except psycopg.Error:
                conn = None  # a lost wake-up only delays readers; reconnect next time
                time.sleep(0.1)
            if final:
                break
            # Commits during this pause share the next NOTIFY: at most one per interval.
            time.sleep(self.MIN_INTERVAL_SECONDS)
        if conn is not None:
            conn.close()

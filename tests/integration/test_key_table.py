"""The ledger's keys in PostgreSQL: a batch of keys is read in one query and served from the
process's cache, so reading a batch of memories (each under its own key) is not a round trip per
memory; the keys concurrent writers make share one statement."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from eventsourcing.postgres import PostgresDatastore

from events import Ledger
from events.key_table import PostgresKeyStore
from events.keys import DataKey, KeyDestroyed, new_key
from events.postgres import connect_kwargs


def test_warmed_keys_are_served_from_the_cache_and_unknown_ones_still_read(
    ledger: Ledger,
) -> None:
    datastore = ledger.database.recorder.datastore
    writer = ledger.sealer.keys
    refs = [DataKey("memory", uuid.uuid4()) for _ in range(5)]
    made = {ref.key_id: writer.obtain(ref) for ref in refs}
    reader = PostgresKeyStore(datastore)
    reader.warm(list(made))
    with datastore.get_connection() as conn:  # gone from the table only
        conn.execute("DELETE FROM ledger_keys WHERE key_id = ANY(%s)", (list(made),))
    assert {key_id: reader.get(key_id) for key_id in made} == made
    unknown = DataKey("memory", uuid.uuid4()).key_id
    reader.warm([unknown])
    assert reader.get(unknown) is None


def test_keys_obtained_at_once_are_each_their_own_and_stored(ledger: Ledger) -> None:
    store = PostgresKeyStore(ledger.database.recorder.datastore)
    refs = [DataKey("run", uuid.uuid4(), uuid.uuid4()) for _ in range(40)]
    with ThreadPoolExecutor(8) as pool:
        keys = list(pool.map(store.obtain, refs))
    assert len(set(keys)) == len(refs)
    again = PostgresKeyStore(ledger.database.recorder.datastore)
    assert [again.obtain(ref) for ref in refs] == keys
    records = {r.key_id: r for r in again.records(key_ids=[ref.key_id for ref in refs])}
    assert [(records[r.key_id].scope_id, records[r.key_id].agent) for r in refs] == [
        (r.scope_id, r.agent) for r in refs
    ]


def test_a_key_another_process_makes_meanwhile_is_the_one_obtained(ledger: Ledger) -> None:
    """The other process's insert commits while this statement waits on it: the statement
    neither makes the key nor sees it, and reads it again."""
    datastore = ledger.database.recorder.datastore
    ref = DataKey("run", uuid.uuid4(), uuid.uuid4())
    theirs = new_key()
    store = PostgresKeyStore(datastore)
    with psycopg.connect(**connect_kwargs(datastore)) as other:
        other.execute(
            "INSERT INTO ledger_keys (key_id, scope, scope_id, agent, key)"
            " VALUES (%s, %s, %s, %s, %s)",
            (ref.key_id, ref.scope, ref.scope_id, ref.agent, theirs),
        )
        with ThreadPoolExecutor(1) as pool:
            obtained = pool.submit(store.obtain, ref)
            while not _waits_on_a_lock(datastore):
                assert not obtained.done(), obtained.result()
            other.commit()
            assert obtained.result(timeout=60) == theirs
    assert store.obtain(ref) == theirs


def test_a_destroyed_key_is_refused_when_obtained(ledger: Ledger) -> None:
    store = ledger.sealer.keys
    ref = DataKey("run", uuid.uuid4(), uuid.uuid4())
    store.obtain(ref)
    store.destroy([ref.key_id], by="test", reason="erased")
    with pytest.raises(KeyDestroyed, match="destroyed"):
        PostgresKeyStore(ledger.database.recorder.datastore).obtain(ref)


def _waits_on_a_lock(datastore: PostgresDatastore) -> bool:
    with psycopg.connect(**connect_kwargs(datastore), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query LIKE '%%INSERT INTO ledger_keys%%'"
        ).fetchone()
    return row is not None and row[0] > 0

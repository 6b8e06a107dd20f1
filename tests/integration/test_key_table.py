"""The ledger's keys in PostgreSQL: a batch of keys is read in one query and served from the
process's cache, so reading a batch of memories (each under its own key) is not a round trip per
memory."""

from __future__ import annotations

import uuid

from events import Ledger
from events.key_table import PostgresKeyStore
from events.keys import DataKey


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

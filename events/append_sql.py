"""The PL/pgSQL functions every ledger append goes through (``events.recorder`` installs them).

Kept apart from the recorder's Python: these texts are the ledger's write protocol (the advisory
lock that orders notification ids with transaction ids, the per-stream version check, the hash
chain), read and reviewed as SQL. Placeholders in braces are filled with ``psycopg.sql``.
"""

ADVISORY_LOCK_KEY = 0x0C1A_1ED6  # any constant shared by all writers of one database

APPEND_ONE_FUNCTION = """
CREATE OR REPLACE FUNCTION {schema}.{one}(stream uuid, version bigint, topic text, state bytea)
RETURNS bigint LANGUAGE plpgsql AS $fn$
-- The one-event append (most commits): the same steps as the array version without building
-- and walking arrays, which is a measurable share of the server's time per commit.
DECLARE
    id bigint;
    previous bytea;
    previous_version bigint := 0;
    row_hash bytea;
BEGIN
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RAISE EXCEPTION 'a ledger append must be the first write of its transaction';
    END IF;
    PERFORM pg_advisory_lock({lock_key});
    PERFORM pg_current_xact_id();
    id := nextval('{schema}.{sequence}');
    PERFORM pg_advisory_unlock({lock_key});
    SELECT t.hash, t.originator_version INTO previous, previous_version FROM {schema}.{table} t
     WHERE t.originator_id = stream AND t.originator_version < version
     ORDER BY t.originator_version DESC LIMIT 1;
    IF NOT FOUND THEN  -- a stream starts at version 1 (eventsourcing's recorders allow 0)
        previous := decode(repeat('00', 32), 'hex');
        previous_version := least(version, 1) - 1;
    END IF;
    IF version <> previous_version + 1 THEN
        RAISE unique_violation USING MESSAGE = format(
            'stream %s: version %s does not follow its last stored version %s',
            stream, version, previous_version);
    END IF;
    row_hash := sha256(previous
        || convert_to(stream::text || ':' || version::text || ':' || topic, 'UTF8')
        || '\\x00'::bytea || state);
    INSERT INTO {schema}.{table} (originator_id, originator_version, topic, state,
                                  notification_id, transaction_id, prev_hash, hash)
    VALUES (stream, version, topic, state, id, pg_current_xact_id(), previous, row_hash);
    RETURN id;
END;
$fn$
"""

APPEND_ROWS_FUNCTION = """
CREATE OR REPLACE FUNCTION {schema}.{rows}(
    streams uuid[], versions bigint[], topics text[], states bytea[], ids bigint[])
RETURNS void LANGUAGE plpgsql AS $fn$
-- Insert events with their allocated ids, chaining each to its stream's previous event.
DECLARE
    previous bytea;
    previous_version bigint;
    previous_stream uuid;
    row_hash bytea;
    i int;
BEGIN
    FOR i IN 1 .. cardinality(streams) LOOP
        IF previous_stream IS DISTINCT FROM streams[i] THEN
            SELECT t.hash, t.originator_version INTO previous, previous_version
              FROM {schema}.{table} t
             WHERE t.originator_id = streams[i] AND t.originator_version < versions[i]
             ORDER BY t.originator_version DESC LIMIT 1;
            IF NOT FOUND THEN  -- a stream starts at version 1 (eventsourcing's recorders allow 0)
                previous := decode(repeat('00', 32), 'hex');
                previous_version := least(versions[i], 1) - 1;
            END IF;
        END IF;
        -- A stream has no gaps: a writer whose earlier append failed must not append past it.
        IF versions[i] <> previous_version + 1 THEN
            RAISE unique_violation USING MESSAGE = format(
                'stream %s: version %s does not follow its last stored version %s',
                streams[i], versions[i], previous_version);
        END IF;
        row_hash := sha256(previous
            || convert_to(streams[i]::text || ':' || versions[i]::text || ':' || topics[i], 'UTF8')
            || '\\x00'::bytea || states[i]);
        INSERT INTO {schema}.{table} (originator_id, originator_version, topic, state,
                                      notification_id, transaction_id, prev_hash, hash)
        VALUES (streams[i], versions[i], topics[i], states[i],
                ids[i], pg_current_xact_id(), previous, row_hash);
        previous := row_hash;
        previous_version := versions[i];
        previous_stream := streams[i];
    END LOOP;
END;
$fn$
"""

_ALLOCATE = """
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RAISE EXCEPTION 'a ledger append must be the first write of its transaction';
    END IF;
    -- Critical section: transaction id and notification ids are assigned together, so that
    -- among ledger writers id order equals transaction-id order. Released before the inserts
    -- and the commit, so commits proceed in parallel.
    PERFORM pg_advisory_lock({lock_key});
    PERFORM pg_current_xact_id();
    SELECT array_agg(nextval('{schema}.{sequence}')) INTO ids FROM generate_series(1, n);
    PERFORM pg_advisory_unlock({lock_key});
"""

APPEND_FUNCTION = (
    """
CREATE OR REPLACE FUNCTION {schema}.{function}(
    streams uuid[], versions bigint[], topics text[], states bytea[])
RETURNS SETOF bigint LANGUAGE plpgsql AS $fn$
DECLARE
    n int := cardinality(streams);
    ids bigint[];
BEGIN"""
    + _ALLOCATE
    + """
    PERFORM {schema}.{rows}(streams, versions, topics, states, ids);
    RETURN QUERY SELECT unnest(ids);
END;
$fn$
"""
)

APPEND_GROUP_FUNCTION = (
    """
CREATE OR REPLACE FUNCTION {schema}.{group}(
    counts int[], streams uuid[], versions bigint[], topics text[], states bytea[])
RETURNS TABLE (id bigint, error text) LANGUAGE plpgsql AS $fn$
-- Several appends (``counts[k]`` events each, in order) in one transaction. Each keeps its own
-- version checks in a savepoint: a conflicting append is rolled back alone and reported in
-- ``error`` (on each of its rows); the others commit with the transaction.
DECLARE
    n int := cardinality(streams);
    ids bigint[];
    errors text[] := array_fill(NULL::text, ARRAY[n]);
    first int := 1;
    last int;
    k int;
BEGIN"""
    + _ALLOCATE
    + """
    FOR k IN 1 .. cardinality(counts) LOOP
        last := first + counts[k] - 1;
        BEGIN
            PERFORM {schema}.{rows}(streams[first:last], versions[first:last],
                                    topics[first:last], states[first:last], ids[first:last]);
        EXCEPTION WHEN unique_violation THEN
            errors[first:last] := array_fill(SQLERRM, ARRAY[counts[k]]);
        END;
        first := last + 1;
    END LOOP;
    RETURN QUERY SELECT * FROM unnest(ids, errors);
END;
$fn$
"""
)

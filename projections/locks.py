"""The advisory lock and the NOTIFY channel of a view.

Their own module because the runner, ``retry_parked``, ``rebuild``, recall's wait and the
memory view's file writer all take the same lock or listen on the same channel, and none of
them should import the others for two names.
"""

from projections.view import View


def channel(name: str) -> str:
    return f"owlclaw_projection_{name}"


def lock_key(view: View) -> str:
    """The advisory lock under which a view's rows and tracking position change."""
    return f"owlclaw-projection:{view.name}"


REBUILD_LOCK_CLASS = 0x4F57
"""The first key of the session lock a rebuild of a view holds (the second: the hash of its
name): a two-key advisory lock, so that the status finds it in ``pg_locks`` (advisory locks
are per database; ``pg_locks`` shows the whole server's)."""

TAKE_REBUILD_LOCK = "SELECT pg_try_advisory_lock(%s, hashtext(%s)) AS taken"
RELEASE_REBUILD_LOCK = "SELECT pg_advisory_unlock(%s, hashtext(%s))"
REBUILD_RUNNING = (
    "SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_database d ON d.oid = l.database"
    " WHERE d.datname = current_database() AND l.locktype = 'advisory' AND l.granted"
    " AND l.classid = %s::oid AND l.objid = hashtext(%s)::oid AND l.objsubid = 2) AS running"
)

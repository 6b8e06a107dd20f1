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

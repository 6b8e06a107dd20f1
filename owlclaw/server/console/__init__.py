"""The web console of ``owlclaw run``: server-rendered pages under ``/ui`` over the ledger and the
projections, behind a login with a principal's token."""

from owlclaw.server.console.app import make_console
from owlclaw.server.console.auth import principal_of

__all__ = ["make_console", "principal_of"]

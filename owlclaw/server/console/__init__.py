"""The web console of ``owlclaw run``: server-rendered pages under ``/ui`` over the ledger and the
projections, behind a login with the server's token."""

from owlclaw.server.console.app import make_console
from owlclaw.server.console.auth import operator_of

__all__ = ["make_console", "operator_of"]

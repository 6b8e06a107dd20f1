"""The principals command group (add, list, revoke, rotate): who may use the server, with which
roles on which agents (``owlclaw.access``).

It works on the database directly, like ``owlclaw erase``: whoever can reach the database is
already its administrator, so each change is recorded ``by`` ``local:<OS user>``."""

import getpass
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from owlclaw.cli.common import (
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    JsonOption,
    app,
    fail,
    handles_errors,
    open_ledger,
    out,
    print_json,
)
from owlclaw.cli.tables import text, whole

if TYPE_CHECKING:
    from owlclaw.access.principals import PrincipalRecord
    from owlclaw.access.store import PrincipalStore

principals_app = typer.Typer(
    no_args_is_help=True, help="Who may use the server: principals, their tokens and roles."
)
app.add_typer(principals_app, name="principals")

RoleOption = Annotated[
    list[str],
    typer.Option(
        "--role",
        help="viewer, operator, approver or admin, optionally on agents matching a glob:"
        " operator:acme.* (repeat for several).",
    ),
]


def _by() -> str:
    return f"local:{getpass.getuser()}"


@contextmanager
def _store() -> "Iterator[PrincipalStore]":
    from owlclaw.access.principals import PrincipalInvalid
    from owlclaw.access.roles import GrantInvalid
    from owlclaw.access.store import PrincipalStore, UnknownPrincipal

    with open_ledger() as (_, led):
        try:
            yield PrincipalStore(led)
        except UnknownPrincipal as e:
            fail(str(e), "`owlclaw principals list` shows them", EXIT_NOT_FOUND)
        except (PrincipalInvalid, GrantInvalid) as e:
            fail(str(e), "see `owlclaw principals --help`", EXIT_USAGE)


def _record_json(record: "PrincipalRecord") -> dict[str, object]:
    return {
        "name": record.name,
        "roles": [str(g) for g in record.grants],
        "revoked": record.revoked,
        "added_at": record.added_at.isoformat(),
        "added_by": record.added_by,
    }


def _show_token(record: "PrincipalRecord", token: str, done: str, as_json: bool) -> None:
    if as_json:
        print_json({**_record_json(record), "token": token})
        return
    roles = ", ".join(str(g) for g in record.grants)
    out.print(f"{done} principal {escape(record.name)} ({escape(roles)})", highlight=False)
    out.print(token, highlight=False, soft_wrap=True)
    out.print(
        "[dim]shown once: only its sha256 is kept. The principal sends it as"
        " `Authorization: Bearer <token>`.[/]",
        highlight=False,
    )


@principals_app.command("add")
@handles_errors
def add(
    name: Annotated[str, typer.Argument(help="The principal's name, recorded on what it does.")],
    roles: RoleOption,
    as_json: JsonOption = False,
) -> None:
    """Add a principal with its roles, and print its new token once."""
    from owlclaw.access.roles import parse_grant

    with _store() as store:
        record, token = store.add(name, [parse_grant(r) for r in roles], by=_by())
    _show_token(record, token, "added", as_json)


@principals_app.command("rotate")
@handles_errors
def rotate(name: str, as_json: JsonOption = False) -> None:
    """Give a principal a new token (printed once); the old one stops working."""
    with _store() as store:
        record, token = store.rotate(name, by=_by())
    _show_token(record, token, "rotated the token of", as_json)


@principals_app.command("revoke")
@handles_errors
def revoke(name: str) -> None:
    """Revoke a principal: its token stops working for good (the name stays taken)."""
    with _store() as store:
        store.revoke(name, by=_by())
    out.print(f"revoked principal {escape(name)}", highlight=False)


@principals_app.command("list")
@handles_errors
def list_principals(as_json: JsonOption = False) -> None:
    """Every principal, revoked ones too, with their roles."""
    with _store() as store:
        records = list(store.records().values())
    if as_json:
        print_json([_record_json(r) for r in records])
        return
    table = Table(whole("name"), text("roles"), whole("state"), whole("added"), title="principals")
    for r in records:
        table.add_row(
            r.name,
            ", ".join(str(g) for g in r.grants),
            "revoked" if r.revoked else "live",
            f"{r.added_at:%Y-%m-%d %H:%M} by {r.added_by}",
        )
    out.print(table)

"""The console's session and authorization without a database: a principal's token logs in (the
name shown is the principal's), the cookie is not the token and stops working when the principal
is revoked or its token rotated, and a page or API call its role does not allow is a 403 naming
the role before the handler runs."""

from __future__ import annotations

import asyncio
from http.cookies import SimpleCookie

from aiohttp import DummyCookieJar, web
from aiohttp.test_utils import TestClient, TestServer

from events import Ledger
from owlclaw.access.roles import parse_grant
from owlclaw.access.store import PrincipalStore
from owlclaw.config import OwlClawConfig
from owlclaw.server.console import make_console
from owlclaw.server.console.access import ROUTES
from owlclaw.server.console.auth import OPEN_PATHS, SESSION_COOKIE
from owlclaw.server.console.session import issue, session_key, token_digest
from owlclaw.server.service import Service
from owlclaw.server.webhook import make_app

SERVER_TOKEN = "secret"


def test_a_session_names_the_token_digest_only_under_its_key() -> None:
    key = session_key(SERVER_TOKEN)
    cookie = issue(key, "owl_abc")
    assert "owl_abc" not in cookie and SERVER_TOKEN not in cookie
    assert token_digest(key, cookie) == cookie.partition(".")[0]
    digest, _, mac = cookie.partition(".")
    forged = f"{digest}.{'0' * len(mac)}"
    for wrong in (forged, digest, "", "x.y", f"{digest}.{mac}é"):
        assert token_digest(key, wrong) is None
    assert token_digest(session_key("another server token"), cookie) is None


def served() -> tuple[Service, PrincipalStore]:
    service = Service(OwlClawConfig(), [])
    service.principals = store = PrincipalStore(Ledger.in_memory())
    service.ready = True
    return service, store


def test_every_console_route_has_its_action() -> None:
    console = make_console(served()[0], SERVER_TOKEN)
    web.Application().add_subapp("/ui", console)  # its routes as the server has them
    routes = {
        (route.method, route.resource.canonical)
        for route in console.router.routes()
        if route.resource is not None and route.method != "HEAD"
    }
    unlisted = {r for r in routes if not f"{r[1]}/".startswith(OPEN_PATHS)} - set(ROUTES)
    assert not unlisted  # a new page must say what it needs


def client_of(service: Service) -> TestClient:
    """A client that keeps no cookies: each request carries the session it is given."""
    return TestClient(TestServer(make_app(service, SERVER_TOKEN)), cookie_jar=DummyCookieJar())


async def _login(client: TestClient, token: str) -> tuple[int, str]:
    origin = str(client.make_url("")).rstrip("/")
    response = await client.post(
        "/ui/login", data={"token": token}, headers={"Origin": origin}, allow_redirects=False
    )
    cookie = SimpleCookie(response.headers.get("Set-Cookie", ""))
    return response.status, cookie[SESSION_COOKIE].value if SESSION_COOKIE in cookie else ""


async def _get(client: TestClient, path: str, session: str) -> web.Response:
    headers = {"Cookie": f"{SESSION_COOKIE}={session}"}
    return await client.get(path, headers=headers, allow_redirects=False)  # type: ignore[return-value]


def test_a_principal_logs_in_and_a_page_out_of_its_scope_is_refused_by_role() -> None:
    service, store = served()
    _, token = store.add("vera", [parse_grant("viewer:acme.*")], by="test")

    async def scenario() -> None:
        async with client_of(service) as client:
            assert (await _login(client, "owl_wrong"))[0] == 401
            status, session = await _login(client, token)
            assert status == 303 and token not in session

            page = await _get(client, "/ui/ledger/globex.bot", session)
            assert page.status == 403
            text = await page.text()
            assert "vera may not ledger.read: it needs role viewer on agent" in text
            assert '<span class="principal">vera</span>' in text  # the principal's, never typed

            in_scope = await _get(client, "/ui/ledger/acme.bot", session)
            assert in_scope.status == 404  # allowed: the handler ran (the agent is not served)

            overview = await _get(client, "/ui/overview", session)
            assert overview.status == 403  # every agent's: an unscoped grant is needed

            api = await _get(client, "/ui/api/agents/globex.bot/runs/x/events", session)
            assert api.status == 403
            body = await api.json()
            assert (body["code"], body["role"], body["agent_id"]) == (
                "forbidden",
                "viewer",
                "globex.bot",
            )

            origin = str(client.make_url("")).rstrip("/")
            cancel = await client.post(
                "/ui/schedules/acme.bot/s1/cancel",
                headers={"Cookie": f"{SESSION_COOKIE}={session}", "Origin": origin},
                allow_redirects=False,
            )
            assert cancel.status == 403
            assert "needs role operator" in await cancel.text()

    asyncio.run(scenario())


def test_a_session_ends_when_its_principal_is_revoked_or_its_token_rotated() -> None:
    service, store = served()
    _, ann = store.add("ann", [parse_grant("viewer")], by="test")
    _, bob = store.add("bob", [parse_grant("viewer")], by="test")

    async def scenario() -> None:
        async with client_of(service) as client:
            sessions = [(await _login(client, t))[1] for t in (ann, bob)]
            _, admin = await _login(client, SERVER_TOKEN)
            for session in (*sessions, admin):
                assert (await _get(client, "/ui/ledger/x", session)).status == 404

            store.revoke("ann", by="test")
            store.rotate("bob", by="test")
            for session in sessions:
                ended = await _get(client, "/ui/ledger/x", session)
                assert (ended.status, ended.headers["Location"]) == (302, "/ui/login")
                api = await _get(client, "/ui/api/agents/x/runs/y/events", session)
                assert api.status == 401
            assert (await _get(client, "/ui/ledger/x", admin)).status == 404  # server-token

    asyncio.run(scenario())

"""The console's login in a real browser: the server's token logs in as its principal
(``server-token``), a wrong one does not, and every page without a session sends the browser to
the login form."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.browser import Console, logged_in, scripted_app

pytestmark = pytest.mark.integration


def test_the_token_logs_in_a_wrong_one_is_refused_and_the_agents_page_lists_the_agent(
    console: Callable[..., Console], tmp_path: Path
) -> None:
    served = console(scripted_app(tmp_path / "desk", "desk", [{"content": "done"}]))
    page, url = served.page, served.url

    page.goto(f"{url}/ui/")
    page.wait_for_url(f"{url}/ui/login")
    assert page.locator("input[name=operator]").count() == 0  # no name is typed
    page.fill("input[name=token]", "not-the-token")
    with page.expect_response(f"{url}/ui/login") as refused:
        page.click("button[type=submit]")
    assert refused.value.status == 401
    assert "wrong token" in page.inner_text("p.error")
    assert not page.context.cookies()
    served.screenshot("login-refused")

    logged_in(page, url, served.token)
    cookies = {c["name"]: c for c in page.context.cookies()}
    session = cookies["owlclaw_session"]
    assert served.token not in session["value"]
    assert all(
        (c["httpOnly"], c["sameSite"], c["path"]) == (True, "Strict", "/ui")
        for c in cookies.values()
    )
    assert set(cookies) == {"owlclaw_session"}
    row = page.locator("tr[data-agent=desk]")
    assert row.locator("a").first.inner_text() == "desk"
    assert row.locator(".state").inner_text() == "idle"
    assert page.inner_text(".principal") == "server-token"
    served.screenshot("agents")

    with httpx.Client(base_url=url, trust_env=False) as http:
        assert http.get("/ui").headers["Location"] == "/ui/"
        assert http.get("/ui/").headers["Location"] == "/ui/login"
        api = http.get("/ui/api/agents")
        assert (api.status_code, api.json()["code"]) == (401, "unauthorized")
        assert http.get("/status").status_code == 401  # the webhook still wants its bearer
        cross_site = http.post(
            "/ui/login",
            data={"token": served.token},
            headers={"Origin": "http://evil.example"},
        )
        assert cross_site.status_code == 403 and "set-cookie" not in cross_site.headers
    with httpx.Client(
        base_url=url, trust_env=False, cookies={"owlclaw_session": served.token}
    ) as http:
        as_token = http.get("/ui/")
        assert as_token.headers["Location"] == "/ui/login"  # the cookie is not the token
    session_cookie = {"owlclaw_session": session["value"]}
    with httpx.Client(base_url=url, trust_env=False, cookies=session_cookie) as http:
        forged = http.post("/ui/logout", headers={"Origin": "http://evil.example"})
        assert forged.status_code == 403

    page.click("text=Log out")
    page.wait_for_url(f"{url}/ui/login")
    page.goto(f"{url}/ui/")
    page.wait_for_url(f"{url}/ui/login")

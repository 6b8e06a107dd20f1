"""The web console in a real headless Chromium (Debian's ``chromium``, driven by Playwright).

``console`` starts a real ``owlclaw run`` service (agents hosted in this process) in a thread
of its own, serving the given apps, and opens a browser page; ``logged_in`` logs that page in
with a token (the server's, or a principal's from ``Console.principal``).
Without chromium or playwright the tests fail in CI and are skipped locally, naming what is
missing.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import threading
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from events import Ledger
from owlclaw.access.roles import parse_grant
from owlclaw.app import load_app
from owlclaw.config import OwlClawConfig
from owlclaw.database import Database
from owlclaw.server.service import Service
from owlclaw.server.webhook import serving
from tests.apps import make_app
from tests.components import missing_component
from tests.served import local_service

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

T = TypeVar("T")
TOKEN = "console-test-token"
START_S = 120.0


@dataclass
class Console:
    """A served service and a browser page that can reach it."""

    service: Service
    config: OwlClawConfig
    page: Page
    shots: Path
    loop: asyncio.AbstractEventLoop
    token: str = TOKEN
    stop_service: Callable[[], None] = field(default=lambda: None)
    """Stop the service (the browser stays open)."""
    stop: Callable[[], None] = field(default=lambda: None)
    """Close the browser page's context, then stop the service."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.config.server.port}"

    @property
    def ledger(self) -> Ledger:
        assert self.service.ledger is not None
        return self.service.ledger

    def call(self, coroutine: Coroutine[Any, Any, T], timeout_s: float = 60) -> T:
        """Run ``coroutine`` on the service's event loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout_s)

    def principal(self, name: str, *grants: str) -> str:
        """A new principal with ``grants`` (``role`` or ``role:pattern``); its token."""
        assert self.service.principals is not None
        roles = [parse_grant(g) for g in grants]
        return self.service.principals.add(name, roles, by="test")[1]

    def screenshot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


def scripted_app(
    root: Path, agent_id: str, steps: list[dict[str, Any]], governance: str = ""
) -> Path:
    """An app whose scripted model plays ``steps`` in every run."""
    config = f'[agent]\nid = "{agent_id}"\nmodels = ["scripted/{agent_id}"]\n'
    app = make_app(root, config=config + (f"[governance]\n{governance}\n" if governance else ""))
    (app / "scripts").mkdir()
    script = {"cases": [{"when": "Trigger", "steps": steps}]}
    (app / "scripts" / f"{agent_id}.json").write_text(json.dumps(script))
    return app


def logged_in(page: Page, base_url: str, token: str) -> Page:
    """``page`` logged in to the console with ``token`` through its login form, on the agents
    page."""
    page.goto(f"{base_url}/ui/login")
    page.fill("input[name=token]", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/ui/")
    return page


@pytest.fixture
def browser() -> Iterator[Browser]:
    """Per test: Playwright's sync API holds an event loop on this thread while it is open, and
    other tests call ``asyncio.run`` here."""
    executable = shutil.which("chromium")
    if executable is None:
        missing_component("chromium", "no `chromium` on PATH (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        missing_component("playwright", e)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox"], headless=True
        )
        yield launched
        launched.close()


def _serve(
    service: Service, config: OwlClawConfig
) -> tuple[asyncio.AbstractEventLoop, Callable[[], None]]:
    """The service started on an event loop in a thread; the function that stops it."""
    started = threading.Event()
    failure: list[BaseException] = []
    state: dict[str, Any] = {}

    async def main() -> None:
        state["stop"] = stop = asyncio.Event()
        state["loop"] = asyncio.get_running_loop()
        try:
            async with serving(service, config):
                started.set()
                await stop.wait()
        except BaseException as e:
            failure.append(e)
            raise
        finally:
            started.set()

    thread = threading.Thread(target=asyncio.run, args=(main(),), name="console-service")
    thread.start()
    if not started.wait(START_S) or failure:
        raise RuntimeError(f"the service did not start: {failure}")

    def stop() -> None:
        if thread.is_alive():
            state["loop"].call_soon_threadsafe(state["stop"].set)
            thread.join(60)

    return state["loop"], stop


@pytest.fixture
def console(
    browser: Browser, fresh_db: Database, tmp_path: Path
) -> Iterator[Callable[..., Console]]:
    """``console(*app_dirs)``: those apps served (placement local) and a fresh browser page."""
    opened: list[Console] = []
    shots = Path(os.environ.get("OWLCLAW_SCREENSHOTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)

    def start(*app_dirs: Path) -> Console:
        config = local_service(fresh_db, tmp_path, TOKEN)
        service = Service(config, [load_app(d) for d in app_dirs])
        loop, stop = _serve(service, config)
        context = browser.new_context()
        page = context.new_page()
        page.set_default_timeout(30_000)

        def close() -> None:
            context.close()
            stop()

        opened.append(Console(service, config, page, shots, loop, stop_service=stop, stop=close))
        return opened[-1]

    yield start
    for each in opened:
        each.stop()

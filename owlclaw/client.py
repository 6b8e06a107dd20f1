"""What the CLI uses to talk to a running ``owlclaw run`` (httpx, loopback)."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from typing import Any
from urllib.parse import urlencode

import httpx
import msgspec

from owlclaw.audit.manifest import Manifest
from owlclaw.config import OwlClawConfig
from owlclaw.messages import ApprovalAnswer, Decision, Fire, FireOutcome, ToolsChange
from owlclaw.reports.approvals import Approvals
from owlclaw.reports.listings import LedgerPage, Runs, Schedules
from owlclaw.server_token import server_token

TRIGGER_ATTEMPTS = 3


class ServerUnavailable(RuntimeError):
    """No ``owlclaw run`` answers at the configured address."""


class NoServer(ServerUnavailable):
    """Nothing listens at the configured address (the connection was refused): a command the
    server would do for the CLI is done by the CLI itself."""


class ServerTimedOut(ServerUnavailable):
    """The server did not answer in time; it may still have done what was asked."""


class ServerNotReady(ServerUnavailable):
    """The server did not become ready (listening, every part started) in the time given."""


class ServerRefused(RuntimeError):
    """The server answered with an error (its message and code are kept)."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status = status
        self.code = code


class _Health(msgspec.Struct):
    ready: bool = False


class _Token(httpx.Auth):
    """A principal's token when one is given; else the server's token as it is when a request
    is sent (a server started just before the CLI writes its token file while the CLI waits
    for it to be ready)."""

    def __init__(self, config: OwlClawConfig, token: str | None):
        self.config = config
        self.token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        if token := self.token or server_token(self.config):
            request.headers["Authorization"] = f"Bearer {token}"
        yield request


class ServerClient:
    def __init__(self, config: OwlClawConfig, timeout_s: float = 30.0, *, token: str | None = None):
        """``token``: a principal's, whose roles the server checks and records as ``by``;
        None: the server's token (every role)."""
        self.url = f"http://{config.server.host}:{config.server.port}"
        self.as_principal = token is not None
        self._http = httpx.Client(
            base_url=self.url,
            timeout=timeout_s,
            auth=_Token(config, token),
            trust_env=False,  # never route loopback calls through a proxy
        )

    def __enter__(self) -> ServerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        try:
            response = self._http.request(method, path, json=body, headers=headers)
        except httpx.TimeoutException as e:
            raise ServerTimedOut(f"`owlclaw run` at {self.url} did not answer in time ({e})") from e
        except httpx.ConnectError as e:
            raise NoServer(f"no `owlclaw run` answers at {self.url} ({e})") from e
        except httpx.TransportError as e:
            raise ServerUnavailable(f"no `owlclaw run` answers at {self.url} ({e})") from e
        if response.status_code >= 400:
            try:
                data = response.json()
            except ValueError:
                data = {"error": response.text, "code": "http_error"}
            raise ServerRefused(response.status_code, data.get("code", ""), data.get("error", ""))
        return response.json()

    def wait_ready(
        self,
        timeout_s: float,
        poll_s: float = 0.2,
        waiting: Callable[[], None] = lambda: None,
    ) -> None:
        """Return once ``GET /health`` says the server is ready, asking again every ``poll_s``
        while nothing listens yet or it is still starting (calling ``waiting`` once, then);
        after ``timeout_s``, ServerUnavailable (nothing answers) or ServerNotReady."""
        deadline = time.monotonic() + timeout_s
        told = False
        while True:
            try:
                response = self._http.get("/health", timeout=max(poll_s, 1.0))
                if msgspec.json.decode(response.content, type=_Health).ready:
                    return
                failure: ServerUnavailable = ServerNotReady(
                    f"`owlclaw run` at {self.url} is still starting after {timeout_s:g} s"
                )
            except httpx.TransportError as e:
                failure = ServerUnavailable(f"no `owlclaw run` answers at {self.url} ({e})")
            except msgspec.DecodeError:
                failure = ServerUnavailable(f"{self.url} is not an `owlclaw run` server")
            if time.monotonic() >= deadline:
                raise failure
            if not told:
                waiting()
                told = True
            time.sleep(poll_s)

    def submit(
        self,
        agent_id: str,
        focus: str | None,
        payload: dict[str, Any],
        *,
        wait: bool = False,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        body = {"focus": focus, "payload": payload, "wait": wait}
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        result: dict[str, Any] = self._call("POST", f"/agents/{agent_id}/trigger", body, headers)
        return result

    def fire(self, fire: Fire) -> FireOutcome:
        """Deliver a timer fire to the agent hosted by the server."""
        data = self._call("POST", f"/agents/{fire.agent_id}/fires", msgspec.to_builtins(fire))
        return msgspec.convert(data, FireOutcome)

    def activate(self, agent_id: str) -> float:
        """Make a served agent ready before a fire; the milliseconds it took the server."""
        return float(self._call("POST", f"/agents/{agent_id}/activate")["ms"])

    def receive(self, agent_id: str, source: str, payload: dict[str, Any]) -> dict[str, Any]:
        body = {"source": source, "payload": payload}
        result: dict[str, Any] = self._call("POST", f"/agents/{agent_id}/events", body)
        return result

    def change_tools(self, agent_id: str, enable: list[str], disable: list[str]) -> ToolsChange:
        """Enable and disable a served agent's tools through its writer."""
        body = {"enable": enable, "disable": disable}
        return msgspec.convert(self._call("POST", f"/agents/{agent_id}/tools", body), ToolsChange)

    def approvals(self, agent_id: str | None) -> Approvals:
        """``owlclaw approvals``' listing: one agent's or every agent's of the ledger, served
        or not."""
        query = {"ledger": 1} if agent_id is None else {"ledger": 1, "agent": agent_id}
        return msgspec.convert(self._call("GET", f"/approvals?{urlencode(query)}"), Approvals)

    def answer_approval(self, decision: Decision) -> ApprovalAnswer:
        """Answer an approval through the served agent's writer (the run resumes at once); a
        principal answers as itself, so its ``by`` is the server's to record."""
        body = {
            "by": None if self.as_principal else decision.by,
            "note": decision.note,
            "arguments": decision.arguments,
            "digest": decision.digest,
        }
        if decision.answer is None:
            body["decision"] = "approve" if decision.approve else "deny"
        else:  # a question's answer
            body["answer"] = decision.answer
        answered = self._call("POST", f"/approvals/{decision.approval_id}", body)
        return msgspec.convert(answered, ApprovalAnswer)

    def memory(self, agent_id: str, recall: str | None, limit: int) -> dict[str, Any]:
        """``owlclaw memory AGENT [--recall] --json``'s answer, from the server's memory view and
        embedder."""
        query = {"k": limit} if recall is None else {"recall": recall, "k": limit}
        params = urlencode(query)
        result: dict[str, Any] = self._call("GET", f"/agents/{agent_id}/memory?{params}")
        return result

    def ledger(self, agent_id: str, after: int, limit: int | None) -> LedgerPage:
        """A page of the agent's events (``owlclaw ledger``; ``limit`` None: every one)."""
        query = {"after": after} if limit is None else {"after": after, "limit": limit}
        page = self._call("GET", f"/agents/{agent_id}/ledger?{urlencode(query)}")
        return msgspec.convert(page, LedgerPage)

    def manifest(self, agent_id: str, run_no: int, step: int | None) -> Manifest:
        """The decision manifest of the agent's run ``run_no`` (``owlclaw explain``)."""
        query = "" if step is None else f"?{urlencode({'step': step})}"
        manifest = self._call("GET", f"/agents/{agent_id}/runs/{run_no}/manifest{query}")
        return msgspec.convert(manifest, Manifest)

    def runs(self, agent_id: str, limit: int) -> Runs:
        """``owlclaw runs``'s listing, from the server's runs view."""
        listing = self._call("GET", f"/agents/{agent_id}/runs?{urlencode({'limit': limit})}")
        return msgspec.convert(listing, Runs)

    def schedules(self, agent_id: str | None, every: bool) -> Schedules:
        """``owlclaw schedules``'s listing (every agent's when ``agent_id`` is None), from the
        server's schedules view."""
        path = "/schedules" if agent_id is None else f"/agents/{agent_id}/schedules"
        return msgspec.convert(self._call("GET", f"{path}?all={int(every)}"), Schedules)

    def verify(self, agent_id: str, run_no: int) -> dict[str, Any]:
        """Run ``run_no`` of the agent re-executed and compared by the server: its
        ``ReplayReport`` as JSON."""
        result: dict[str, Any] = self._call("POST", f"/agents/{agent_id}/runs/{run_no}/verify")
        return result

    def status(self, *, ledger: bool = False) -> dict[str, Any]:
        """The server's status; with ``ledger``, also ``owlclaw status``'s report of the ledger
        and its views (its ``ledger`` key) when the principal may read every agent's."""
        result: dict[str, Any] = self._call("GET", "/status?ledger=1" if ledger else "/status")
        return result

"""Typed configuration: defaults, then ``owlclaw.toml``, then ``OWLCLAW_*`` environment variables.

Invalid values are rejected at start-up with a message naming the field.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from owlclaw.struct_errors import describe, error_path

ENV_PREFIX = "OWLCLAW_"


class ConfigError(ValueError):
    """The configuration is invalid; the message names the field."""


class LedgerConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    snapshot_interval: Annotated[int, msgspec.Meta(ge=2, le=1_000_000)] = 100
    """An Agent aggregate is snapshotted every N events, so loading reads at most N events."""
    archive_dir: str | None = None
    """Where ``owlclaw archive`` moves ended runs (a local directory; default
    ``<data_dir>/archive``). Every process that reads the ledger reads archived runs there."""
    archive_after_days: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """``owlclaw run`` archives its agents' runs that ended this many days ago, daily (as
    ``owlclaw archive --before``); None: only ``owlclaw archive`` does."""
    encrypt: bool = True
    """Seal content that may hold personal data under data keys, so ``owlclaw erase`` can
    erase it (docs/ledger-lifecycle.md); false stores new content in plaintext."""


class MemoryConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    embedding_model: str = "local/all-MiniLM-L6-v2"
    """``local/all-MiniLM-L6-v2`` (offline) or any litellm embedding model string."""
    embedding_dimensions: Annotated[int, msgspec.Meta(ge=1, le=16_000)] = 384
    """Vector size of a litellm embedding model (the local model is 384)."""
    half_life_days: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    """Recall weighs a memory by 0.5 ** (age / half-life)."""
    memory_md_limit_bytes: Annotated[int, msgspec.Meta(ge=1024)] = 10 * 1024 * 1024
    """Beyond this size, an agent's oldest memories move to MEMORY.archive.md."""
    archive_after_days: Annotated[int, msgspec.Meta(ge=0, le=36_500)] = 90
    """Archive active memories not recalled (nor remembered) for this many days (0: never)."""
    delete_after_days: Annotated[int, msgspec.Meta(ge=0, le=36_500)] = 365
    """Delete archived memories this many days after they were archived, their content erased
    (0: never)."""


class ApprovalsConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    notify_url: str | None = None
    """Where each approval request is POSTed (JSON, ``Idempotency-Key: <approval id>``), at
    least once; None: nobody is notified (``owlclaw approvals`` still lists them)."""
    notify_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    notify_attempts: Annotated[int, msgspec.Meta(ge=1, le=20)] = 5
    """Tries per request (exponential backoff with jitter) before it is parked for
    ``owlclaw projections retry approval_notifications``."""


class RuntimeConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    models: tuple[str, ...] = ("scripted/demo",)
    """Fallback chain of litellm model strings, tried in order."""
    max_function_calls: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 50
    llm_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 60.0
    run_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 300.0
    max_identical_calls: Annotated[int, msgspec.Meta(ge=2, le=100)] = 3
    doom_loop_failures: Annotated[int, msgspec.Meta(ge=2, le=100)] = 3
    """A tool failing this many times in a row with the same error code ends the run."""
    tool_retries: Annotated[int, msgspec.Meta(ge=0, le=5)] = 2
    """Retries (exponential backoff with jitter) of idempotent tools after a system error."""
    parallel_tool_calls: Annotated[int, msgspec.Meta(ge=1, le=64)] = 8
    """How many calls of one model response run at once, at most, when their tools may run
    side by side (idempotent or ``parallel_safe``); 1 runs every call in turn."""
    tool_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 30.0
    """Time limit of one tool call, for tools that set none."""
    tool_result_bytes: Annotated[int, msgspec.Meta(ge=256)] = 16 * 1024
    """Results above this are cut (with a marker) before the model sees them, for tools that
    set no ``max_result_bytes`` and agents whose ``[agent] tool_result_bytes`` sets none."""
    tool_result_ledger_bytes: Annotated[int, msgspec.Meta(ge=1024)] = 1024 * 1024
    """The ledger keeps a result whole up to this size; above, its JSON text cut."""
    prompt_tokens: Annotated[int, msgspec.Meta(ge=1000, le=1_000_000)] = 8000
    """Budget of the whole system prompt, in the (first) model's tokens: over it, its parts
    are trimmed in a fixed order (docs/limits.md); an app whose SOUL.md, IDENTITY.md and skill
    names alone exceed it is refused."""
    context_tokens: Annotated[int, msgspec.Meta(ge=0, le=100_000)] = 2000
    """Budget of the short-term context (recent activity) in the system prompt."""
    skills_tokens: Annotated[int, msgspec.Meta(ge=0, le=100_000)] = 4000
    """Budget of the skill bodies in the system prompt."""
    recall_in_prompt: Annotated[int, msgspec.Meta(ge=0, le=20)] = 5
    """Memories recalled for the focus at run start and placed in the prompt (0: none)."""
    recall_min_similarity: Annotated[float, msgspec.Meta(ge=-1, le=1)] = 0.2
    """Recall (the tool and the prompt's memories) leaves out memories whose cosine similarity
    to the query is below this, so nothing unrelated is forced into the prompt. 0.2 with
    all-MiniLM-L6-v2: the seed's "market crash recovery" finds its rebound lesson at 0.214,
    while 95 % of unrelated pairs score below it (docs/projections.md, Memory lifecycle)."""
    max_memories: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 10_000
    """Active memories an agent holds; at the limit, remember archives the oldest."""
    placement: Literal["local", "dedicated", "shared"] = "shared"
    """Where agents run: Ray actors, one per agent (``dedicated``) or hashed onto a pool of
    host actors (``shared``); ``local`` hosts them in the serving process without Ray."""
    hosts: Annotated[int, msgspec.Meta(ge=1, le=1024)] = msgspec.field(
        default_factory=lambda: min(4, os.cpu_count() or 1)
    )
    """Host actors of ``shared`` placement. A host runs its agents' Python on one core: hosts
    beyond the cores add ~315 MB and ~4 s of CPU at start each (litellm's import), not runs.
    Default: this machine's cores, at most the four the connection budget counts; on a cluster
    set it for the cluster (every process of one service must use the same number)."""
    scripts_dir: str | None = None
    """JSON scripts for the ``scripted/<name>`` model, loaded by every OwlClaw process."""
    app_load_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=600)] = 5.0
    """Time an app's handlers.py gets to import (in a child process, before it is imported in
    the agent's): code that takes longer is recorded as AppLoadFailed and the agent's runs
    fail until the file changes."""


class TimersConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    backend: Literal["builtin", "hatchet"] = "builtin"
    """Where timers live; ``hatchet`` needs HATCHET_CLIENT_TOKEN (or the local engine) and
    degrades to ``builtin`` for schedules it cannot register."""
    max_retries: Annotated[int, msgspec.Meta(ge=0, le=20)] = 3
    """Delivery retries of a fire (Hatchet: the task's ``retries``)."""
    lease_s: Annotated[float, msgspec.Meta(gt=0)] = 300.0
    """How long a built-in worker holds a due timer before another may deliver it."""
    misfire_grace_s: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    """A fire delivered later than this counts as missed and follows its schedule's on_missed."""
    hatchet_slots: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 32
    """Deliveries the Hatchet worker runs at once. One holds its slot until the agent's verdict
    is committed (milliseconds, never the run): 32 keep four shared hosts' ledger pools busy
    during a burst of fires, where more would only queue in those pools (SDK default 100). The
    worker takes more tasks from the engine (``hatchet_backend.ENGINE_SLOTS``): a task that
    waits for its fire time holds none of these."""
    hatchet_bin: str | None = None
    """Hatchet engine binaries (scripts/build-hatchet.sh): with ``backend = "hatchet"`` and no
    HATCHET_CLIENT_TOKEN, ``owlclaw run`` starts this engine on OwlClaw's PostgreSQL server
    (default ``<data_dir>/bin`` when built there)."""


class ServerConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The HTTP endpoint of ``owlclaw run`` (webhook triggers; what ``owlclaw trigger`` calls)."""

    host: str = "127.0.0.1"
    """Loopback by default; bind elsewhere only behind TLS and with a strong token."""
    port: Annotated[int, msgspec.Meta(ge=1, le=65535)] = 8765
    token: str | None = None
    """Bearer token every request must carry; unset: ``owlclaw run`` generates one into
    ``<data_dir>/server.token`` (mode 0600), which the CLI reads."""
    metrics_token_required: bool | None = None
    """Whether ``GET /metrics`` needs the token too. Unset: not when ``host`` is a loopback
    address (only this machine can reach it, and a Prometheus scraping it needs no secret),
    yes otherwise (bound to a network, the metrics name agents, tools and models)."""

    @property
    def metrics_need_token(self) -> bool:
        if self.metrics_token_required is not None:
            return self.metrics_token_required
        return not is_loopback(self.host)


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP address (a host name that resolves elsewhere is not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class EvidenceConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    signing_key: str | None = None
    """The Ed25519 private key (PEM) that signs exported evidence bundles; default
    ``<data_dir>/keys/signing_key.pem`` (``owlclaw keys init`` writes it)."""


AGENT_GLOB = r"^[A-Za-z0-9_.*?\[\]!-]{1,128}$"
"""An agent-id glob: agent-id characters (``owlclaw.app.AGENT_ID``) and ``* ? [ ] !``."""
TENANT_NAME = r"^[A-Za-z0-9_-]{1,64}$"


class TenantConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A tenant: the agents whose ids match ``agents``, and the limits they share across every
    process serving them (docs/governance.md, Tenants)."""

    agents: str
    """A glob over agent ids (case-sensitive), e.g. ``acme.*``."""
    daily_cost_usd: Annotated[float, msgspec.Meta(gt=0)] | None = None
    """What the tenant's agents together may spend per UTC day; a run that finds it spent
    ends with BudgetExceeded (``tenant:<name>.daily_cost_usd``) before its next model call."""
    max_concurrent_runs: Annotated[int, msgspec.Meta(ge=1, le=10_000)] | None = None
    """Runs of the tenant's agents running at once; further runs wait queued for a slot."""

    def __post_init__(self) -> None:
        if not re.fullmatch(AGENT_GLOB, self.agents):
            raise ValueError(
                f"agents = {self.agents!r}: 1-128 agent-id characters (letters, digits, '_',"
                " '.', '-') and the globs '*', '?', '[...]'"
            )


class OwlClawConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    data_dir: str = ".owlclaw"
    """Where the embedded PostgreSQL keeps its data (``<data_dir>/pg``)."""
    database_url: str | None = None
    """An external PostgreSQL server; the embedded one is used when unset."""
    database_name: str = "owlclaw"
    ray_address: str | None = None
    """An existing Ray cluster (``ray://head:10001`` or ``auto``); a local one when unset."""
    ledger: LedgerConfig = LedgerConfig()
    memory: MemoryConfig = MemoryConfig()
    runtime: RuntimeConfig = RuntimeConfig()
    approvals: ApprovalsConfig = ApprovalsConfig()
    timers: TimersConfig = TimersConfig()
    server: ServerConfig = ServerConfig()
    evidence: EvidenceConfig = EvidenceConfig()
    tenants: dict[Annotated[str, msgspec.Meta(pattern=TENANT_NAME)], TenantConfig] = {}
    """``[tenants.<name>]``: sets of agents with shared limits; an agent is in at most one."""
    workspaces_dir: str | None = None
    """Where each agent's workspace directory is (``<workspaces_dir>/<agent id>``), the only
    place its file and exec tools act in; default ``<data_dir>/workspaces``."""

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir).expanduser().resolve()

    @property
    def memory_path(self) -> Path:
        """Where the agents' MEMORY.md files are: ``<data_dir>/memory/<agent>/``."""
        return self.data_path / "memory"

    @property
    def workspaces_path(self) -> Path:
        if self.workspaces_dir is not None:
            return Path(self.workspaces_dir).expanduser().resolve()
        return self.data_path / "workspaces"

    @property
    def archive_path(self) -> Path:
        if self.ledger.archive_dir is not None:
            return Path(self.ledger.archive_dir).expanduser().resolve()
        return self.data_path / "archive"

    @property
    def signing_key_path(self) -> Path:
        if self.evidence.signing_key is not None:
            return Path(self.evidence.signing_key).expanduser().resolve()
        return self.data_path / "keys" / "signing_key.pem"


ENV_FIELDS = {
    "DATA_DIR": ("data_dir",),
    "DATABASE_URL": ("database_url",),
    "DATABASE_NAME": ("database_name",),
    "WORKSPACES_DIR": ("workspaces_dir",),
    "RAY_ADDRESS": ("ray_address",),
    "SNAPSHOT_INTERVAL": ("ledger", "snapshot_interval"),
    "ARCHIVE_DIR": ("ledger", "archive_dir"),
    "ARCHIVE_AFTER_DAYS": ("ledger", "archive_after_days"),
    "LEDGER_ENCRYPT": ("ledger", "encrypt"),
    "EMBEDDING_MODEL": ("memory", "embedding_model"),
    "EMBEDDING_DIMENSIONS": ("memory", "embedding_dimensions"),
    "MEMORY_HALF_LIFE_DAYS": ("memory", "half_life_days"),
    "MEMORY_MD_LIMIT_BYTES": ("memory", "memory_md_limit_bytes"),
    "MEMORY_ARCHIVE_AFTER_DAYS": ("memory", "archive_after_days"),
    "MEMORY_DELETE_AFTER_DAYS": ("memory", "delete_after_days"),
    "MAX_FUNCTION_CALLS": ("runtime", "max_function_calls"),
    "LLM_TIMEOUT_S": ("runtime", "llm_timeout_s"),
    "RUN_TIMEOUT_S": ("runtime", "run_timeout_s"),
    "PROMPT_TOKENS": ("runtime", "prompt_tokens"),
    "CONTEXT_TOKENS": ("runtime", "context_tokens"),
    "SKILLS_TOKENS": ("runtime", "skills_tokens"),
    "RECALL_IN_PROMPT": ("runtime", "recall_in_prompt"),
    "MODELS": ("runtime", "models"),
    "SCRIPTS_DIR": ("runtime", "scripts_dir"),
    "PLACEMENT": ("runtime", "placement"),
    "HOSTS": ("runtime", "hosts"),
    "APP_LOAD_TIMEOUT_S": ("runtime", "app_load_timeout_s"),
    "TIMER_BACKEND": ("timers", "backend"),
    "TIMER_GRACE_S": ("timers", "misfire_grace_s"),
    "TIMER_LEASE_S": ("timers", "lease_s"),
    "HATCHET_BIN": ("timers", "hatchet_bin"),
    "HATCHET_SLOTS": ("timers", "hatchet_slots"),
    "SERVER_HOST": ("server", "host"),
    "SERVER_PORT": ("server", "port"),
    "SERVER_TOKEN": ("server", "token"),
    "SERVER_METRICS_TOKEN_REQUIRED": ("server", "metrics_token_required"),
    "APPROVALS_NOTIFY_URL": ("approvals", "notify_url"),
    "SIGNING_KEY": ("evidence", "signing_key"),
}


def load_config(path: Path | None = None, environ: dict[str, str] | None = None) -> OwlClawConfig:
    """Load ``owlclaw.toml`` (if present) and apply ``OWLCLAW_*`` overrides."""
    environ = dict(os.environ) if environ is None else environ
    raw: dict[str, Any] = {}
    toml_path = path or Path(environ.get(f"{ENV_PREFIX}CONFIG", "owlclaw.toml"))
    if toml_path.is_file():
        try:
            raw = tomllib.loads(toml_path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{toml_path}: {e}") from e
    for suffix, keys in ENV_FIELDS.items():
        value = environ.get(ENV_PREFIX + suffix)
        if value is None or value == "":
            continue
        target = raw
        for key in keys[:-1]:
            target = target.setdefault(key, {})
        target[keys[-1]] = value.split(",") if keys == ("runtime", "models") else value
    try:
        return msgspec.convert(raw, OwlClawConfig, strict=False)
    except msgspec.ValidationError as e:
        variables = {
            keys: ENV_PREFIX + suffix
            for suffix, keys in ENV_FIELDS.items()
            if environ.get(ENV_PREFIX + suffix)
        }
        where = variables.get(error_path(e)) or toml_path
        raise ConfigError(f"{where}: {describe(e, OwlClawConfig, raw)}") from e

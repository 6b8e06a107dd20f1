"""The configuration of a service the tests run in their own process: agents hosted locally,
on the test's database, listening on a free loopback port."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from owlclaw.bench import free_port
from owlclaw.config import OwlClawConfig, RuntimeConfig, ServerConfig
from owlclaw.database import Database


def local_service(
    fresh_db: Database, tmp_path: Path, token: str = "test-token", **overrides: Any
) -> OwlClawConfig:
    defaults: dict[str, Any] = {
        "database_url": fresh_db.url,
        "database_name": str(fresh_db.params["dbname"]),
        "data_dir": str(tmp_path / "data"),
        "runtime": RuntimeConfig(placement="local"),
        "server": ServerConfig(port=free_port(), token=token),
    }
    return OwlClawConfig(**(defaults | overrides))

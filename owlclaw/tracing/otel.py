"""Tracing to any OTLP endpoint, switched by the standard OpenTelemetry variables: on when
OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (and not
OTEL_SDK_DISABLED=true). Off, the SDK is not imported. The spans: ``otel_spans``."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from owlclaw.tracing.otel_spans import OtelTracer

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")

_tracer: OtelTracer | None = None
_settings: dict[str, str] | None = None


def enable() -> OtelTracer | None:
    """The OTLP backend when an endpoint is configured; None otherwise. The exporter reads the
    OTEL_* variables when it is made, so a change of them makes a new one (the old provider is
    shut down in the background, sending what it holds)."""
    global _tracer, _settings  # noqa: PLW0603 - the process's provider, as its exporter's
    settings = {k: v for k, v in os.environ.items() if k.startswith("OTEL_")}
    if settings == _settings:
        return _tracer
    if _tracer is not None:
        threading.Thread(target=_tracer.provider.shutdown, name="otlp-shutdown").start()
    _settings = settings
    on = any(settings.get(k) for k in ENDPOINT_VARIABLES)
    disabled = settings.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    _tracer = None
    if on and not disabled:
        from owlclaw.tracing.otel_spans import OtelTracer

        _tracer = OtelTracer.exporting()
    return _tracer

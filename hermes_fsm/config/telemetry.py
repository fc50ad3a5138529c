"""OpenTelemetry as the configuration says (``telemetry:``; off by default).

``exporter: console`` prints spans; ``otlp`` sends them over OTLP/HTTP (``endpoint``, or
the SDK's ``OTEL_EXPORTER_OTLP_*`` variables). Both need the otel extra
(``pip install 'hermes-fsm[otel]'``). The tracer provider is process-wide: the first
configuration that turns tracing on sets it; later ones leave it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hermes_fsm.errors import ConfigError

if TYPE_CHECKING:
    from hermes_fsm.config.settings import HermesConfig

__all__ = ["configure_telemetry", "flush_telemetry"]

_configured: list[Any] = []


def configure_telemetry(config: HermesConfig) -> bool:
    """Install the configured exporter; ``True`` when tracing is on in this process.

    Raises:
        ConfigError: an exporter is asked for but the SDK (or the OTLP exporter) is missing.
    """
    t = config.telemetry
    if t.exporter == "none":
        return bool(_configured)
    if _configured:
        return True
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        raise ConfigError(f"telemetry.exporter {t.exporter} needs the OpenTelemetry SDK: "
                          "pip install 'hermes-fsm[otel]' (or set exporter: none)") from None
    exporter: Any
    if t.exporter == "console":
        exporter = ConsoleSpanExporter()
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ConfigError("telemetry.exporter otlp needs the OTLP exporter: pip install "
                              "'hermes-fsm[otel]'") from None
        exporter = OTLPSpanExporter(endpoint=t.endpoint) if t.endpoint else OTLPSpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": t.service_name}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _configured.append(provider)
    return True


def flush_telemetry() -> None:
    """Export every span still buffered (a no-op when tracing is off in this process).

    What a process calls before it leaves without the interpreter's teardown (the
    ``hermes-fsm`` command does): the SDK's own flush at exit would not run then.
    """
    for provider in _configured:
        provider.force_flush()

"""``telemetry:`` in the configuration: off by default, the SDK asked for only when on."""

from __future__ import annotations

import pytest

from hermes_fsm.config import HermesConfig
from hermes_fsm.config.telemetry import configure_telemetry
from hermes_fsm.errors import ConfigError


def test_telemetry_is_off_by_default():
    assert HermesConfig().telemetry.exporter == "none"


def test_otlp_without_its_exporter_installed_says_what_to_install():
    try:
        import opentelemetry.exporter.otlp.proto.http  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("the OTLP exporter is installed here")
    from hermes_fsm.config import telemetry

    if telemetry._configured:
        pytest.skip("a tracer provider is already configured in this process")
    with pytest.raises(ConfigError, match=r"hermes-fsm\[otel\]"):
        configure_telemetry(HermesConfig(telemetry={"exporter": "otlp"}))

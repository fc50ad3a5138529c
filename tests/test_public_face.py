"""The package root: the names an application needs, errors in ``hermes_fsm.errors``."""

from __future__ import annotations

import subprocess
import sys

import pytest

import hermes_fsm
from hermes_fsm import errors
from hermes_fsm.events import recording
from hermes_fsm.replay import ReplayResult


def test_the_face_is_about_twenty_names_and_each_resolves() -> None:
    assert 18 <= len(hermes_fsm.__all__) <= 24
    assert all(getattr(hermes_fsm, name) is not None for name in hermes_fsm.__all__)
    assert not [n for n in hermes_fsm.__all__ if n.endswith("Error") and n != "HermesError"]


def test_importing_the_package_leaves_the_server_and_psycopg_unimported() -> None:
    code = ("import sys, hermes_fsm; print(sorted(m for m in ('hermes_fsm.server.app', "
            "'hermes_fsm.store.postgres', 'starlette', 'psycopg') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_the_lazy_names_are_the_real_ones() -> None:
    from hermes_fsm.server.app import create_app
    from hermes_fsm.store.postgres import PostgresStore

    assert hermes_fsm.create_app is create_app and hermes_fsm.PostgresStore is PostgresStore


def test_names_the_root_used_to_export_still_resolve_to_their_modules() -> None:
    from hermes_fsm.sources import FixedClock

    assert hermes_fsm.SessionBusy is errors.SessionBusy
    assert hermes_fsm.FixedClock is FixedClock
    with pytest.raises(AttributeError, match="no attribute 'Orchestrater'"):
        hermes_fsm.Orchestrater  # noqa: B018


def test_recording_and_replay_errors_are_in_the_tree_and_where_they_were() -> None:
    assert issubclass(errors.RecordingError, errors.HermesError)
    assert issubclass(errors.ReplayFailed, errors.HermesError)
    assert recording.RecordingError is errors.RecordingError
    assert hermes_fsm.replay.ReplayFailed is errors.ReplayFailed
    assert "RecordingError" in (errors.__doc__ or "") and "ReplayFailed" in (errors.__doc__ or "")
    failed = errors.ReplayFailed(ReplayResult("a.jsonl", "rerun", 1, 9, error="boom"))
    assert str(failed) == "rerun of a.jsonl failed:\nboom" and failed.result.turns == 1

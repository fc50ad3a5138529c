"""Where the package's data lives: ``hermes_fsm/data`` (links into the checkout's
``states/`` and ``contracts/``, copies in a wheel)."""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent / "data"


def data_path(*parts: str) -> Path:
    """A path under the package's data directory, links resolved."""
    return DATA_DIR.joinpath(*parts).resolve()

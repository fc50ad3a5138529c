"""Exported contract schemas: write them for review, check them against the models.

Each contract is exported to ``<dir>/<name>.json`` (name, version, JSON Schema). The
committed files make every contract change visible in review, and:

- ``check`` fails when a committed schema differs from its model (run ``export``), when
  a model has no committed schema, and when a committed schema has no model;
- ``export`` refuses to write a change that needs a bigger version bump than the model
  got (a breaking change — a field removed, a type narrowed, a field made required —
  needs a new major version), unless forced; so an unbumped breaking change cannot be
  committed by accident.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

from hermes_fsm._internal.data import data_path
from hermes_fsm.contracts.base import Contract, ContractRegistry, dump_schema
from hermes_fsm.contracts.schema_diff import (
    bump_problem,
    diff_schemas,
    parse_version,
    required_bump,
)
from hermes_fsm.contracts.tools import dump_tool_contract, load_tool_contract
from hermes_fsm.errors import ContractCheckFailed, ContractError

__all__ = ["check_contracts", "check_mcp_tool_contracts", "check_tool_contracts",
           "default_contract_dir", "export_contracts", "export_mcp_tool_contracts",
           "export_tool_contracts"]


def default_contract_dir() -> Path:
    """``contracts/states`` of the source checkout (through the package's data link)."""
    return data_path("contracts", "states")


def _latest(registry: ContractRegistry) -> dict[str, type[Contract]]:
    """The newest version of each contract name (older versions are not exported)."""
    newest: dict[str, type[Contract]] = {}
    for contract in registry:
        current = newest.get(contract.contract_name)
        if current is None or _key(contract) > _key(current):
            newest[contract.contract_name] = contract
    return newest


def _key(contract: type[Contract]) -> tuple[int, ...]:
    return tuple(int(p) for p in contract.contract_version.split("."))


def _read(path: Path) -> dict[str, object]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ContractError(f"{path}: cannot read the exported schema ({exc}); "
                            "delete it and run 'hermes-fsm contracts export'") from None
    if not (isinstance(doc, dict) and {"name", "version", "schema"} <= doc.keys()):
        raise ContractError(f"{path}: not an exported contract (needs name, version, schema); "
                            "delete it and run 'hermes-fsm contracts export'")
    return doc


def _bump_problem(contract: type[Contract], path: Path) -> str | None:
    old = _read(path)
    changes = diff_schemas(old["schema"], contract.json_schema())  # type: ignore[arg-type]
    problem = bump_problem(str(old["version"]), contract.contract_version, changes)
    if problem:
        return (f"{contract.contract_name} ({contract.__module__}.{contract.__qualname__}): "
                f"{problem}")
    return None


def export_contracts(registry: ContractRegistry, directory: str | Path,
                     force: bool = False) -> list[Path]:
    """Write each contract's schema; returns the files that changed.

    Raises:
        ContractCheckFailed: a change needs a bigger version bump (unless ``force``).
    """
    directory = Path(directory)
    return _write_changed(
        ((directory / f"{name}.json", dump_schema(contract), partial(_bump_problem, contract))
         for name, contract in sorted(_latest(registry).items())),
        directory, force)


def _pinned_bump_problem(contract: Any, path: Path) -> str | None:
    return _tool_bump_problem(load_tool_contract(path), contract, path)


def _write_changed(files: Iterable[tuple[Path, str, Callable[[Path], str | None]]],
                   directory: Path, force: bool) -> list[Path]:
    """Write each ``(path, text, needed_bump)`` whose text changed; all or nothing.

    ``needed_bump(path)`` says why the change needs a bigger version bump (or ``None``);
    any such problem stops every write unless ``force``.
    """
    directory.mkdir(parents=True, exist_ok=True)
    pending: list[tuple[Path, str]] = []
    problems: list[str] = []
    for path, text, needed_bump in files:
        if path.exists():
            if path.read_text(encoding="utf-8") == text:
                continue
            problem = needed_bump(path)
            if problem and not force:
                problems.append(problem)
                continue
        pending.append((path, text))
    if problems:
        raise ContractCheckFailed([*problems, "nothing was written; bump the versions "
                                   "(or pass --force to export anyway)"])
    for path, text in pending:
        path.write_text(text, encoding="utf-8")
    return [path for path, _ in pending]


def check_contracts(registry: ContractRegistry, directory: str | Path) -> int:
    """Check that every exported schema matches its model; returns how many were checked.

    Raises:
        ContractCheckFailed: with one line per problem and what to do about it.
    """
    directory = Path(directory)
    problems: list[str] = []
    latest = _latest(registry)
    for name, contract in sorted(latest.items()):
        path = directory / f"{name}.json"
        if not path.exists():
            problems.append(f"{name}: no exported schema at {path}; run "
                            "'hermes-fsm contracts export' and commit it")
            continue
        if path.read_text(encoding="utf-8") == dump_schema(contract):
            continue
        problem = _bump_problem(contract, path)
        if problem:
            problems.append(problem)
        else:
            problems.append(f"{name}: {path} differs from the model {contract.ref()}; run "
                            "'hermes-fsm contracts export' and commit the change")
    if directory.is_dir():
        for path in sorted(directory.glob("*.json")):
            if path.stem not in latest:
                problems.append(f"{path}: no contract named {path.stem!r} is registered; "
                                "delete the file or register the contract")
    if problems:
        raise ContractCheckFailed(problems)
    return len(latest)


# --- tool contracts (contracts/tools/<name>.yaml) ---------------------------------------


def _tool_bump_problem(old: Any, new: Any, path: Path) -> str | None:
    try:
        changes = diff_schemas(old.input_schema, new.input_schema)
        changes += diff_schemas(old.output_schema or {}, new.output_schema or {})
    except ValueError as exc:  # a schema the comparison cannot follow
        return f"{path}: tool {new.name}: cannot compare the schemas: {exc}"
    problem = bump_problem(old.version, new.version, changes)
    return f"{path}: tool {new.name}: {problem}" if problem else None


def export_tool_contracts(registry: Any, directory: str | Path,
                          force: bool = False) -> list[Path]:
    """Pin the contract of every local tool of ``registry`` in ``directory``.

    Returns the files written. MCP tools are pinned by hand (their contract comes from
    the server). Raises ContractCheckFailed when a schema change needs a bigger version
    bump than the tool got (unless ``force``).
    """
    directory = Path(directory)
    return _write_changed(
        ((directory / f"{tool.name}.yaml", dump_tool_contract(tool.contract),
          partial(_pinned_bump_problem, tool.contract))
         for tool in registry.tools() if tool.source == "local"),
        directory, force)


def _load_pin(path: Path, name: str, problems: list[str], how: str) -> Any:
    """The pinned contract at ``path``, or None with the problem appended (missing or bad)."""
    if not path.exists():
        problems.append(f"tool {name}: no pinned contract at {path}; run "
                        f"'hermes-fsm contracts export'{how} and commit it")
        return None
    try:
        return load_tool_contract(path)
    except ContractError as exc:
        problems.append(str(exc))
        return None


def check_tool_contracts(registry: Any, directory: str | Path) -> int:
    """Check the pinned tool contracts against the local tools; returns how many were checked.

    Every local tool needs a pinned file equal to its contract (or a changed one with the
    right version bump still counts as a difference to export); every pinned file must
    parse, and name a local tool or an MCP tool (``<server>.<tool>``, checked at connect
    time).

    Raises:
        ContractCheckFailed: with one line per problem and what to do about it.
    """
    directory = Path(directory)
    problems: list[str] = []
    local = {t.name: t for t in registry.tools() if t.source == "local"}
    for name, tool in sorted(local.items()):
        path = directory / f"{name}.yaml"
        pinned = _load_pin(path, name, problems, "")
        if pinned is None:
            continue
        if path.read_text(encoding="utf-8") == dump_tool_contract(tool.contract):
            continue
        problem = _tool_bump_problem(pinned, tool.contract, path)
        problems.append(problem or f"tool {name}: {path} differs from the tool's contract; run "
                        "'hermes-fsm contracts export' and commit the change")
    pinned_count = 0
    if directory.is_dir():
        for path in sorted(directory.glob("*.yaml")):
            if path.stem in local:
                continue
            try:
                load_tool_contract(path)
            except ContractError as exc:
                problems.append(str(exc))
                continue
            if "." not in path.stem:
                problems.append(f"{path}: no local tool named {path.stem!r}; delete the file, "
                                "register the tool, or name an MCP tool <server>.<tool>")
            pinned_count += 1
    if problems:
        raise ContractCheckFailed(problems)
    return len(local) + pinned_count


# --- MCP tools' contracts, as their servers advertise them ------------------------------------


def _schema_changes(pinned: Any, advertised: Any) -> list[Any]:
    """The non-cosmetic changes from a pinned contract's schemas to the advertised ones."""
    changes = diff_schemas(pinned.input_schema, advertised.input_schema)
    if pinned.output_schema is not None or advertised.output_schema is not None:
        changes += diff_schemas(pinned.output_schema or {}, advertised.output_schema or {})
    return [c for c in changes if c.bump != "patch"]


def _bumped(version: str, bump: str) -> str:
    major, minor, patch = parse_version(version)
    if bump == "major":
        return f"{major + 1}.0.0"
    return f"{major}.{minor + 1}.0" if bump == "minor" else f"{major}.{minor}.{patch + 1}"


def export_mcp_tool_contracts(advertised: Iterable[Any], directory: str | Path) -> list[Path]:
    """Pin the contracts of MCP tools (``<server>.<tool>``) as their servers advertise them.

    A tool without a pinned file gets its advertised contract. A pinned tool whose server
    still matches the pin (cosmetic changes aside) keeps its file as written (descriptions,
    errors, permissions you edited stay); one whose schemas changed gets the new schemas
    under the pin's other fields, with the version bump the change needs (a removed or
    narrowed field: major). Returns the files written.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for contract in sorted(advertised, key=lambda c: c.name):
        path = directory / f"{contract.name}.yaml"
        if path.exists():
            pinned = load_tool_contract(path)
            changes = _schema_changes(pinned, contract)
            if not changes:
                continue
            contract = pinned.model_copy(update={
                "input_schema": contract.input_schema, "output_schema": contract.output_schema,
                "version": _bumped(pinned.version, required_bump(changes))})
        path.write_text(dump_tool_contract(contract), encoding="utf-8")
        written.append(path)
    return written


def check_mcp_tool_contracts(advertised: Iterable[Any], directory: str | Path) -> int:
    """Check that every advertised MCP tool has a pinned contract its server still matches;
    returns how many were checked.

    Raises:
        ContractCheckFailed: one line per tool without a pin, or whose server drifted from it.
    """
    directory = Path(directory)
    problems: list[str] = []
    count = 0
    for contract in sorted(advertised, key=lambda c: c.name):
        count += 1
        path = directory / f"{contract.name}.yaml"
        pinned = _load_pin(path, contract.name, problems,
                           " (it pins what the server advertises)")
        if pinned is None:
            continue
        changes = _schema_changes(pinned, contract)
        if changes:
            lines = "; ".join(f"{c.path or '(root)'}: {c.detail} (needs a {c.bump} bump)"
                              for c in changes[:5])
            problems.append(f"{path}: the server's {contract.name} drifted from its pinned "
                            f"contract {pinned.version}: {lines}; run 'hermes-fsm contracts "
                            "export' to re-pin it (with the version bump) and commit it")
    if problems:
        raise ContractCheckFailed(problems)
    return count

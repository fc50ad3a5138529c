"""``hermes-fsm tools list|show NAME|call NAME --args JSON [--user U]``: every tool, local and MCP.

``list`` prints each tool with its source (``local`` or ``mcp:<server>``), contract
version, side effects, whether a plan calling it waits for approval, its preconditions
and its health (``ok``, or why it cannot be called now: server down, breaker open); a
canaried tool's line has each version's error rate and a rollback, as the experience log
has them (every process's calls).
``show`` prints one tool's whole contract. ``call`` makes one call through the full
executor pipeline — input schema, permissions of ``--user``, preconditions, breaker,
timeout, retries, output schema and postconditions — and prints the output; a refused or
failed call prints one line (its error code and message) and exits 1.

Registered from :mod:`hermes_fsm.cli.main`; the tools are those the configuration
describes (the demo tools and the configured MCP servers, which are started for the
command and stopped after it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import TYPE_CHECKING, Any, TextIO

from hermes_fsm.errors import ToolError, UsageError

if TYPE_CHECKING:  # what the command runs is imported when it runs (hermes_fsm.cli.main)
    from hermes_fsm.config.settings import HermesConfig
    from hermes_fsm.tools.registry import Tool, ToolRegistry

__all__ = ["add_tools_parser", "run_tools", "tool_record"]


def add_tools_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``tools`` command to the CLI's subparsers."""
    tools = sub.add_parser("tools", parents=[common],
                           help="every tool (local and MCP): list, show one, call one")
    tools.add_argument("action", choices=["list", "show", "call"],
                       help="list: every tool with source, version, side effects, approval, "
                            "preconditions and health; show: one tool's contract; call: run "
                            "one through the executor pipeline")
    tools.add_argument("name", nargs="?", default=None,
                       help="show, call: the tool's name (e.g. store_stock, "
                            "demo.calendar_events)")
    tools.add_argument("--args", metavar="JSON", default=None,
                       help="call: the arguments as a JSON object (default: {})")
    tools.add_argument("--user", default="cli-user",
                       help="call: the user the call is made for (default: cli-user)")
    tools.add_argument("--json", action="store_true", help="print JSON")


def tool_record(registry: ToolRegistry, tool: Tool, full: bool = False) -> dict[str, Any]:
    """What ``tools list`` (or, with ``full``, ``tools show``) says of ``tool``."""
    contract = tool.contract
    assert contract is not None
    health = registry.unavailable(tool)
    record: dict[str, Any] = {
        "name": tool.name, "source": tool.source, "version": contract.version,
        "side_effects": contract.side_effects, "idempotent": contract.is_idempotent,
        "approval": contract.approval, "permissions": list(contract.permissions),
        "preconditions": [c.label for c in contract.preconditions],
        "postconditions": [c.label for c in contract.postconditions],
        "compensation": contract.compensation.model_dump(exclude_defaults=True)
        if contract.compensation is not None else None,
        "health": "ok" if health is None else f"unavailable: {health}"}
    stable = next((c.stable for c in registry.canaries.values() if c.candidate == tool.name),
                  None)
    if stable is not None or tool.name in registry.preferred:  # not offered to brains
        record["hidden"] = (f"the canary version of {stable}" if stable is not None else
                            f"overlaps {registry.preferred[tool.name]} (tools.prefer)")
    canary = registry.canaries.get(tool.name)
    if canary is not None:  # a new version gets a share of the calls (tools/canary.py)
        candidate = registry.find(canary.candidate)
        version = candidate.contract.version if candidate and candidate.contract else \
            "not registered"
        record["canary"] = {"candidate": canary.candidate, "version": version,
                            "share": canary.share, "by": canary.by,
                            "rolled_back": canary.rolled_back,
                            "line": canary.describe(version)}
    if full:
        record.update({
            "description": contract.description, "timeout_s": contract.timeout_s,
            "retry": contract.retry.model_dump(),
            "errors": {k: v.model_dump() for k, v in contract.errors.items()},
            "on_output_violation": contract.on_output_violation
            if isinstance(contract.on_output_violation, str)
            else contract.on_output_violation.model_dump(),
            "input_schema": contract.input_schema, "output_schema": contract.output_schema,
            "registries": sorted(contract.registries),
            "preconditions": [c.model_dump(mode="json", exclude_defaults=True)
                              for c in contract.preconditions],
            "postconditions": [c.model_dump(mode="json", exclude_defaults=True)
                               for c in contract.postconditions]})
    return record


def run_tools(args: argparse.Namespace, config: HermesConfig, out: TextIO) -> int:
    """Run ``tools list|show|call``; returns the exit code (1: a call refused or failed)."""
    if args.action == "list" and args.name is not None:
        raise UsageError(f"tools list takes no name (got {args.name!r}); use "
                         f"'hermes-fsm tools show {args.name}'")
    if args.action != "list" and not args.name:
        raise UsageError(f"tools {args.action} needs a tool name: hermes-fsm tools "
                         f"{args.action} NAME (see 'hermes-fsm tools list')")
    if args.action != "call" and args.args is not None:
        raise UsageError("--args only applies to 'tools call'")
    arguments: dict[str, Any] = {}
    if args.action == "call":
        arguments = _arguments(args.args)
    return asyncio.run(_act(args, config, arguments, out))


def _arguments(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--args is not JSON ({exc.msg} at character {exc.pos}); give an "
                         "object, e.g. --args '{\"sku\": \"A1001\"}'") from None
    if not isinstance(value, dict):
        raise UsageError(f"--args must be a JSON object, not {type(value).__name__}; e.g. "
                         "--args '{\"sku\": \"A1001\"}'")
    return value


async def _act(args: argparse.Namespace, config: HermesConfig, arguments: dict[str, Any],
               out: TextIO) -> int:
    from hermes_fsm.config.toolbox import Toolbox

    log = None
    if args.action == "list" and config.tools.canaries:  # their rates and rollbacks, as
        from hermes_fsm.config.memory import build_experience_log  # every process logs them

        log = build_experience_log(config.memory)
    box = Toolbox.from_config(config, outcomes=log)
    await box.mcp.start()
    try:
        registry = box.registry
        if args.action == "list":
            await box.executor.refresh_canaries()
            records = [tool_record(registry, t) for t in registry.tools()]
            _print_list(records, args.json, out)
            return 0
        tool = registry.find(args.name)
        if tool is None:
            raise ToolError(f"no tool {args.name!r}; known tools: "
                            f"{', '.join(registry.names()) or 'none'}")
        if args.action == "show":
            record = tool_record(registry, tool, full=True)
            out.write(json.dumps(record, ensure_ascii=False, indent=2 if not args.json else None)
                      + "\n")
            return 0
        [envelope] = await box.executor.execute([("cli-1", tool.name, arguments)],
                                                caller=args.user)
        if args.json:
            out.write(json.dumps(envelope, ensure_ascii=False, default=str) + "\n")
        elif envelope["success"]:
            out.write(json.dumps(envelope["output"], ensure_ascii=False, indent=2,
                                 default=str) + "\n")
        if not envelope["success"]:
            raise ToolError(f"tools call {tool.name}: {envelope['error_code']}: "
                            f"{envelope['message']}")
        return 0
    finally:
        await box.mcp.aclose()
        if log is not None:
            await log.close()


def _print_list(records: list[dict[str, Any]], as_json: bool, out: TextIO) -> None:
    if as_json:
        out.write(json.dumps({"tools": records}, ensure_ascii=False, indent=2) + "\n")
        return
    for r in records:
        approval = "  approval" if r["approval"] else ""
        out.write(f"{r['name']}  {r['source']}  v{r['version']}  {r['side_effects']}"
                  f"{approval}  {r['health']}\n")
        if r["preconditions"]:
            out.write(f"  preconditions: {', '.join(r['preconditions'])}\n")
        if r["postconditions"]:
            out.write(f"  postconditions: {', '.join(r['postconditions'])}\n")
        if r.get("hidden"):
            out.write(f"  not offered: {r['hidden']}\n")
        if r.get("canary"):
            out.write(f"  {r['canary']['line']}\n")
        if r["compensation"]:
            undo = r["compensation"]
            status = f"status {undo['status']}, " if undo.get("status") else ""
            out.write(f"  compensation: {status}undone by {undo['compensate']}\n")

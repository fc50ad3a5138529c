"""The ``hermes-fsm`` command line.

::

    hermes-fsm run "How many A1001 are left in the east warehouse?"   # one turn, events live
    hermes-fsm chat                                                   # a conversation
    hermes-fsm graph --format mermaid                                 # or dot, svg, html
    hermes-fsm run --record out/ "..."                                # and write a recording
    hermes-fsm view out/<session>.jsonl --out page.html               # the recording over the graph
    hermes-fsm contracts export | check                               # state and tool contracts
    hermes-fsm mcp list [--json]                                      # MCP servers and health
    hermes-fsm tools list | show NAME | call NAME --args JSON          # every tool; call one
    hermes-fsm explain SESSION [--turn N] [--json]                    # a turn's evidence chain
    hermes-fsm serve [--host H] [--port P]                            # the ASGI app (HTTP + SSE)
    hermes-fsm sessions archive --idle 30m                            # idle sessions → memory
    hermes-fsm worker [--group G] [--concurrency N]                   # serve tools off the bus
    hermes-fsm workers list [--json]                                  # live workers

Every command takes ``--config PATH`` (or ``HERMES_CONFIG``); without one, everything runs
embedded. Errors print one line saying what to do and exit 2 (usage) or 1 (failure).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from hermes_fsm._internal.redact import redact
from hermes_fsm.cli.explain import add_explain_parser, run_explain
from hermes_fsm.cli.leave import leave
from hermes_fsm.cli.memory import add_memory_parser, run_memory
from hermes_fsm.cli.record import add_record_parser, run_record
from hermes_fsm.cli.replay import add_replay_parser, run_replay
from hermes_fsm.cli.sessions import add_sessions_parser, run_sessions
from hermes_fsm.cli.tools import add_tools_parser, run_tools
from hermes_fsm.cli.view import (
    GRAPH_FORMATS,
    add_record_option,
    add_view_parser,
    attach_recording,
    render_graph,
    run_view,
)
from hermes_fsm.cli.worker import add_worker_parsers, run_worker, run_workers
from hermes_fsm.errors import ContextOverflow, HermesError

# A command imports what it runs when it runs: `--help` and `graph` start without the
# engine, the memory tiers (numpy, Qdrant, embedders), the MCP SDK, Redis or psycopg
# (tests/test_cli_imports.py; bench/cli.py measures the whole process).
if TYPE_CHECKING:
    from hermes_fsm.config.settings import HermesConfig
    from hermes_fsm.engine.orchestrator import Orchestrator
    from hermes_fsm.events.sinks import EventSink

__all__ = ["entry", "main"]


class _Parser(argparse.ArgumentParser):
    """argparse with options and positionals mixed in any order in every command, and usage
    errors that name the (sub)command's own ``--help``."""

    _intermixing = False

    def error(self, message: str) -> Any:  # usage errors: a clear line, exit 2, no traceback
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n(run '{self.prog} --help' for usage)\n")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        # a command (no subcommands of its own) parses intermixed: `memory search --user a
        # "query"` works; its stray arguments are its own usage error, not the top level's
        if self._intermixing or any(a.nargs == argparse.PARSER
                                    for a in self._get_positional_actions()):
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            namespace, extras = super().parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def _parser() -> argparse.ArgumentParser:
    config_help = "config file (default: $HERMES_CONFIG, else embedded defaults)"
    # --config works before or after the command; the command's copy must not reset it
    common = _Parser(add_help=False)
    common.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS, help=config_help)
    p = _Parser(prog="hermes-fsm", description="An explicit FSM orchestrator for LLM agents.")
    p.add_argument("--config", metavar="PATH", default=None, help=config_help)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND",
                           parser_class=_Parser)

    run = sub.add_parser("run", parents=[common], help="run one turn and print its events live")
    run.add_argument("text", help="the user's message")
    _turn_options(run)
    run.add_argument("--json", action="store_true",
                     help="print events as JSON lines (and the result as the last line)")

    chat = sub.add_parser("chat", parents=[common], help="an interactive conversation")
    _turn_options(chat)
    chat.add_argument("--quiet", action="store_true", help="print only the answers")

    graph = sub.add_parser("graph", parents=[common], help="print the state graph")
    graph.add_argument("--format", choices=GRAPH_FORMATS, default="mermaid",
                       help="mermaid or dot: diagram text; svg: a picture; html: a page "
                            "(default: mermaid)")
    graph.add_argument("--graph", metavar="PATH", help="graph file (default: from config)")
    graph.add_argument("--recording", metavar="FILE", type=Path, default=None,
                       help="mermaid, dot, svg: also draw the compensation steps this "
                            "recording ran (a status query, an undo), each its own edge")

    contracts = sub.add_parser("contracts", parents=[common],
                               help="state contract schemas and tool contracts")
    contracts.add_argument("action", choices=["export", "check"],
                           help="export: write the schemas of today's contracts; "
                                "check: fail when a model differs from its written schema")
    contracts.add_argument("--dir", metavar="DIR", type=Path,
                           help="where schemas live (default: contracts/states of the checkout)")
    contracts.add_argument("--force", action="store_true",
                           help="export even a breaking change without a major version bump")
    contracts.add_argument("--tools-dir", metavar="DIR", type=Path,
                           help="where tool contracts live (default: contracts/tools)")
    contracts.add_argument("--no-mcp", action="store_true",
                           help="do not start the configured MCP servers (by default their "
                                "tools' contracts are pinned and checked too)")

    mcp = sub.add_parser("mcp", parents=[common], help="MCP servers: status and tools")
    mcp.add_argument("action", choices=["list"],
                     help="list: each configured server, its health and its tools")
    mcp.add_argument("--json", action="store_true", help="one JSON document")

    serve = sub.add_parser("serve", parents=[common],
                           help="serve the ASGI app: turns over HTTP, events as SSE")
    serve.add_argument("--host", help="address to listen on (default: server.host, 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default: server.port, 8765)")

    add_replay_parser(sub, common)
    add_record_parser(sub, common)
    add_view_parser(sub, common)
    add_memory_parser(sub, common)
    add_sessions_parser(sub, common)
    add_worker_parsers(sub, common)
    add_tools_parser(sub, common)
    add_explain_parser(sub, common)
    return p


def _memory(args: argparse.Namespace, config: HermesConfig, out: TextIO) -> int:
    return run_memory(args, config, out)


def _sessions(args: argparse.Namespace, config: HermesConfig, out: TextIO) -> int:
    return run_sessions(args, config, out)


def _turn_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--user", default="cli-user", help="user id (default: cli-user)")
    p.add_argument("--session", help="session id (default: a new one)")
    p.add_argument("--domain", metavar="NAME", help=(
        "the memory domain a new session declares (e.g. credit_card): its recall and "
        "commits stay inside it (default: none)"))
    p.add_argument("--graph", metavar="PATH", help="graph file (default: from config)")
    add_record_option(p)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 failure, 2 usage)."""
    out = out or sys.stdout
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exit_:  # usage errors (2) and --help (0), already printed
        return int(exit_.code or 0)
    try:
        from hermes_fsm.config.settings import load_config

        config = load_config(args.config)
        if getattr(args, "graph", None):
            config = config.model_copy(update={"graph": Path(args.graph)})
        _configure_logging(config)
        command = {"run": _run, "chat": _chat, "graph": _graph, "contracts": _contracts,
                   "mcp": _mcp, "replay": _replay, "view": run_view, "memory": _memory,
                   "serve": _serve, "record": _record, "sessions": _sessions,
                   "worker": run_worker, "workers": run_workers, "tools": run_tools,
                   "explain": run_explain}
        code = command[args.command](args, config, out)
        out.flush()
        return code
    except BrokenPipeError:  # `hermes-fsm run --json ... | head -1`: quiet, as Unix tools are
        _silence_stdout()
        return 141  # 128 + SIGPIPE, what a shell shows for a tool its reader left
    except HermesError as exc:
        print(f"hermes-fsm: {redact(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("hermes-fsm: interrupted", file=sys.stderr)
        return 130


def entry() -> NoReturn:
    """The ``hermes-fsm`` script: :func:`main` on the process's arguments, then leave
    without the interpreter's teardown (:mod:`hermes_fsm.cli.leave`)."""
    leave(main())


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real stdout (in-process use): nothing to silence
        pass


def _configure_logging(config: HermesConfig) -> None:
    if config.log.format == "off":
        return
    import structlog

    renderer: Any = (structlog.processors.JSONRenderer() if config.log.format == "json"
                     else structlog.dev.ConsoleRenderer())
    structlog.configure(
        processors=[structlog.processors.add_log_level,
                    structlog.processors.TimeStamper(fmt="iso"), renderer],
        wrapper_class=structlog.make_filtering_bound_logger(
            getattr(logging, config.log.level.upper())),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


def _orchestrator(config: HermesConfig, printer: EventSink) -> Orchestrator:
    from hermes_fsm.config.build import store_reading_orchestrator

    orchestrator = store_reading_orchestrator(config)  # nothing here reads the in-process log
    if orchestrator.mcp is not None:  # a server starts when a turn first calls its tools
        orchestrator.mcp.on_demand = True
    orchestrator.add_sink(printer)
    return orchestrator


def _run(args: argparse.Namespace, config: HermesConfig, out: TextIO) -> int:
    from hermes_fsm.cli.console import ConsolePrinter

    orchestrator = _orchestrator(config, ConsolePrinter(out, as_json=args.json))
    recorder = attach_recording(orchestrator, args.record)

    async def turn() -> Any:
        async with orchestrator:  # MCP servers start at their first call, stop after it
            return await orchestrator.run_turn(args.session, args.text, user_id=args.user,
                                               domain=args.domain)

    try:
        result = asyncio.run(turn())
    finally:
        if recorder is not None:
            recorder.close()
    if recorder is not None and not args.json:
        out.write(f"recorded: {recorder.path_for(result.session_id)}\n")
    if args.json:
        out.write(json.dumps({"result": {"session_id": result.session_id,
                                         "turn_id": result.turn_id, "status": result.status,
                                         "answer": result.answer, "path": result.path}},
                             ensure_ascii=False) + "\n")
    else:
        out.write(f"\nanswer: {result.answer}\n")
    return 0


def _chat(args: argparse.Namespace, config: HermesConfig, out: TextIO) -> int:
    from hermes_fsm.cli.console import ConsolePrinter

    printer = ConsolePrinter(out)
    orchestrator = _orchestrator(config, printer)
    if args.quiet:
        orchestrator.remove_sink(printer)
    recorder = attach_recording(orchestrator, args.record)
    session = orchestrator.session(args.session, args.user)
    out.write(f"session {session.session_id} — type a message, or /quit to leave\n")
    if recorder is not None:
        out.write(f"recording to {recorder.path_for(session.session_id)}\n")

    async def loop() -> None:
        async with orchestrator:
            await converse()

    async def converse() -> None:
        while True:
            out.write("you> ")
            out.flush()
            line = await asyncio.to_thread(sys.stdin.readline)
            if not line or line.strip() in ("/quit", "/exit"):
                return
            if not line.strip():
                continue
            try:
                result = await orchestrator.run_turn(session.session_id, line.strip(),
                                                     args.user, domain=args.domain)
            except ContextOverflow as exc:  # too long: say so, and let the user go on
                out.write(f"hermes-fsm: {exc}\n")
                continue
            out.write(f"agent> {result.answer}\n")

    try:
        asyncio.run(loop())
    finally:
        if recorder is not None:
            recorder.close()
    return 0


def _graph(args: argparse.Namespace, config: HermesConfig, out: TextIO) -> int:
    from hermes_fsm.graph.loader import default_graph_path, load_graph

    graph = load_graph(config.graph or default_graph_path())
    overlay = None
    if getattr(args, "recording", None) is not None:
        from hermes_fsm.events.recording import load_recording
        from hermes_fsm.viz.overlay import overlay_from_events

        overlay = overlay_from_events(load_recording(args.recording).events)
    out.write(render_graph(graph, args.format, overlay))
    return 0


def _contracts(args: argparse.Namespace, config: HermesConfig, out: TextIO) -> int:
    from hermes_fsm.cli.mcp_contracts import advertised_contracts
    from hermes_fsm.config.local_tools import configured_registry
    from hermes_fsm.contracts.check import (
        check_contracts,
        check_mcp_tool_contracts,
        check_tool_contracts,
        default_contract_dir,
        export_contracts,
        export_mcp_tool_contracts,
        export_tool_contracts,
    )
    from hermes_fsm.contracts.tools import default_tool_contract_dir
    from hermes_fsm.graph.loader import default_graph_path, load_graph
    from hermes_fsm.tools.bus.messages import BUS_CONTRACTS

    graph = load_graph(config.graph or default_graph_path())
    directory = args.dir or default_contract_dir()
    tools_dir = args.tools_dir or config.tools.contracts_dir or default_tool_contract_dir()
    registry = configured_registry(config.tools.local, config.tools.demo, config.source)
    bus_dir = default_contract_dir().parent / "bus" if args.dir is None else args.dir.parent / "bus"
    if args.action == "export":
        written = export_contracts(graph.contracts, directory, force=args.force)
        written += export_tool_contracts(registry, tools_dir, force=args.force)
        written += export_contracts(BUS_CONTRACTS, bus_dir, force=args.force)
        if config.mcp_servers and not args.no_mcp:
            written += export_mcp_tool_contracts(advertised_contracts(config)[0], tools_dir)
        for path in written:
            out.write(f"wrote {path}\n")
        out.write(f"{len(written)} contract file(s) changed, in {directory}, {tools_dir} "
                  f"and {bus_dir}\n")
        return 0
    checked = check_contracts(graph.contracts, directory)
    out.write(f"ok: {checked} contract schema(s) in {directory} match their models\n")
    tools = check_tool_contracts(registry, tools_dir)
    out.write(f"ok: {tools} tool contract(s) in {tools_dir} match their tools\n")
    if config.mcp_servers and not args.no_mcp:
        advertised, servers = advertised_contracts(config)
        count = check_mcp_tool_contracts(advertised, tools_dir)
        out.write(f"ok: {count} MCP tool contract(s) match what their servers advertise "
                  f"({', '.join(servers)})\n")
    if bus_dir.is_dir() or args.dir is None:
        messages = check_contracts(BUS_CONTRACTS, bus_dir)
        out.write(f"ok: {messages} bus message schema(s) in {bus_dir} match their models\n")
    return 0


def _mcp(args: argparse.Namespace, config: HermesConfig, out: TextIO) -> int:
    from hermes_fsm.config.toolbox import Toolbox

    box = Toolbox.from_config(config)
    bus = None
    if config.bus.kind != "none" and config.bus.mcp_servers:  # run by the bus's workers
        from hermes_fsm.config.bus import add_bus_mcp_servers, build_bus

        bus = build_bus(config)
        assert bus is not None
        # Redis: the heartbeats read once; in-process: this process's worker starts them
        add_bus_mcp_servers(config, bus, box.mcp,
                            connect_timeout_s=0.0 if config.bus.kind == "redis" else None)

    async def survey() -> list[dict[str, Any]]:
        await box.mcp.start()
        try:
            sources = {c.name: getattr(c, "source", f"mcp:{c.name}") for c in box.mcp}
            records = box.mcp.info()
            for record in records:
                source = sources[record["name"]]
                record["tool_names"] = sorted(t.name for t in box.registry.tools()
                                              if t.source == source)
            return records
        finally:
            await box.mcp.aclose()
            if bus is not None:
                await bus.aclose()

    records = asyncio.run(survey())
    if args.json:
        out.write(json.dumps({"servers": records}, ensure_ascii=False, indent=2) + "\n")
        return 0
    if not records:
        out.write("no MCP servers configured (mcp_servers in the config file)\n")
    for r in records:
        out.write(f"{r['name']}: {r['status']}  transport={r['transport']}  "
                  f"protocol={r['protocol_version'] or '-'}  tools={r['tools']}  "
                  f"resources={r['resources']}  prompts={r['prompts']}\n")
        if r["tool_names"]:
            out.write(f"  tools: {', '.join(r['tool_names'])}\n")
        if r.get("resource_uris"):
            out.write(f"  resources: {', '.join(r['resource_uris'])}\n")
        if r.get("prompt_names"):
            used = set(r.get("prompts_used") or ())
            out.write("  prompts: " + ", ".join(f"{p} (used by intent)" if p in used else p
                                                 for p in r["prompt_names"]) + "\n")
        if "served_by" in r:
            _served_by(r, out)
        if r["last_error"]:
            out.write(f"  last error: {r['last_error']}\n")
        for problem in r["problems"]:
            out.write(f"  problem: {problem}\n")
    return 0


def _served_by(record: dict[str, Any], out: TextIO) -> None:
    """The workers that run a bus-served MCP server, from their heartbeats."""
    if not record["served_by"]:
        out.write(f"  served by: no live worker of bus group {record['group']!r} (start one "
                  f"with `hermes-fsm worker --group {record['group']}`)\n")
        return
    now = time.time()
    for w in record["served_by"]:
        error = f"; last error: {w['last_error']}" if w.get("last_error") else ""
        out.write(f"  served by: worker {w['worker_id']} (group {record['group']}, "
                  f"{w['host']} pid {w['pid']}): {w['status']}, tools={w['tools']}, "
                  f"in_flight={w['in_flight']}/{w['concurrency']}, "
                  f"heartbeat {max(0.0, now - w['last_heartbeat']):.1f}s ago{error}\n")


def _serve(args: argparse.Namespace, config: HermesConfig, out: TextIO) -> int:
    from hermes_fsm.server.serve import serve as serve_app

    return serve_app(config, host=args.host, port=args.port, out=out)


def _record(args: argparse.Namespace, config: HermesConfig, out: TextIO) -> int:
    return run_record(args, config, out)


def _replay(args: argparse.Namespace, config: HermesConfig, out: TextIO) -> int:
    return run_replay(args, config.graph, out)


if __name__ == "__main__":  # pragma: no cover
    entry()

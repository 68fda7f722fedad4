"""Agent loop overhead: what a step of :class:`mcpwire.agent.Run` costs beyond the model's answer
and the tool call itself, measured against the same work done without the loop in the same run.

    python bench/agent_overhead.py [--steps N] [--runs N] [--json]

The model is an in-process provider that answers at once: a streamed-like answer (two text
chunks and one tool call's chunks, so the loop turns them into events) asking for one tool call
per step, then a final answer. Two tool surfaces:

- ``instant``: a surface whose calls return at once, so the loop's own work is all that is left;
- ``host``: the host's tools (``HostTools``) on the bundled demo server, a real stdio round trip
  through the host's policy stack per call.

For each, ``loop`` is a whole run read event by event (``async for event in run``) divided by
its steps, and ``direct`` is the same provider answers and the same tool calls awaited in a
plain loop with no run, events or state (the baseline). ``overhead`` is their difference per
step: the loop's own cost (events, the channel to the reader, state changes, the conversation,
budgets, tool specs, result cutting). Each figure is the median of ``--runs`` runs, the two
workloads interleaved. Both wall-clock time and this process's CPU time are measured: on a
loaded machine the CPU figure is the steadier one (other processes' time is not in it; the
demo server's own CPU time is in neither workload). Target: an overhead under 1 ms per step; a
miss is reported, never an error.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Mapping

import trio

from mcpwire.agent import Agent, AgentPolicy, Completion, Message, ModelRequest, TextPart, ToolCall, Usage
from mcpwire.agent.messages import ToolSpec
from mcpwire.agent.providers import ChunkCallback, TextChunk, ToolCallChunk
from mcpwire.agent.tools import ApprovalTicket, Ask, Decision, HostTools, ToolOutcome, ToolSurface
from mcpwire.host import Host, HostConfig, parse_server
from mcpwire.protocol.types import JSONObject
from mcpwire.testing import demo_server_argv

TARGET_MS = 1.0


class InstantProvider:
    """Answers at once: a tool call per step until ``steps`` calls were made, then an answer."""

    name = "instant"
    model = "instant"
    supports_tool_images = False

    def __init__(self, tool: str, arguments: JSONObject, steps: int) -> None:
        self.tool = tool
        self.raw = json.dumps(arguments)
        self.steps = steps
        self.usage = Usage(input_tokens=10, output_tokens=5)

    @property
    def label(self) -> str:
        return "instant provider"

    async def complete(self, request: ModelRequest, on_chunk: ChunkCallback | None = None) -> Completion:
        step = (len(request.messages) + 1) // 2  # user, then (assistant, tool) per step
        if step > self.steps:
            if on_chunk is not None:
                await on_chunk(TextChunk("Done."))
            message = Message(role="assistant", parts=(TextPart(text="Done."),))
            return Completion(message=message, usage=self.usage, stop_reason="end_turn")
        call = ToolCall.parse(f"call_{step}", self.tool, self.raw)
        if on_chunk is not None:
            await on_chunk(TextChunk("Let me "))
            await on_chunk(TextChunk("check."))
            await on_chunk(ToolCallChunk(0, call.id, call.name, ""))
            await on_chunk(ToolCallChunk(0, None, None, self.raw))
        message = Message(role="assistant", parts=(TextPart(text="Let me check."), call))
        return Completion(message=message, usage=self.usage, stop_reason="tool_use")

    async def aclose(self) -> None:
        pass


class InstantTools:
    """One tool whose calls return at once."""

    def __init__(self) -> None:
        self._specs = [ToolSpec(name="bench__echo", description="Echo.", input_schema={"type": "object"})]

    def specs(self) -> list[ToolSpec]:
        return self._specs

    def locate(self, name: str) -> tuple[str, str] | None:
        return ("bench", "echo") if name == "bench__echo" else None

    async def call(self, name: str, arguments: JSONObject, *, context: Mapping[str, str], ask: Ask) -> ToolOutcome:
        await trio.lowlevel.checkpoint()
        return ToolOutcome(text=str(arguments.get("text", "")), outcome="ok", server="bench", tool="echo")


Timing = tuple[float, float]  # (wall-clock seconds, CPU seconds of this process)


def _now() -> Timing:
    return time.perf_counter(), time.process_time()


def _since(start: Timing) -> Timing:
    wall, cpu = _now()
    return wall - start[0], cpu - start[1]


async def _loop(tools: ToolSurface, provider: InstantProvider) -> Timing:
    agent = Agent(tools, provider, policy=AgentPolicy(max_tool_calls=provider.steps), max_steps=provider.steps + 1)
    start = _now()
    async with agent.run("go") as run:
        async for _ in run:
            pass
    elapsed = _since(start)
    assert run.outcome is not None and run.outcome.steps == provider.steps + 1, run.outcome
    return elapsed


async def _direct(tools: ToolSurface, provider: InstantProvider) -> Timing:
    """The same answers and calls with no loop around them (the conversation is grown as the
    provider needs it to count steps)."""

    async def deny(ticket: ApprovalTicket) -> Decision:
        raise AssertionError(f"no approval is asked in this benchmark ({ticket.name})")

    start = _now()
    messages = [Message.user("go")]
    specs = tuple(tools.specs())
    while True:
        completion = await provider.complete(ModelRequest(messages=tuple(messages), tools=specs))
        calls = completion.message.tool_calls
        if not calls:
            break
        outcome = await tools.call(calls[0].name, calls[0].arguments or {}, context={}, ask=deny)
        messages += [completion.message, completion.message]  # two messages per step, as the loop adds
        assert outcome.outcome == "ok", outcome
    return _since(start)


async def _compare(name: str, tools: ToolSurface, provider: InstantProvider, runs: int) -> dict[str, float | str]:
    loop: list[Timing] = []
    direct: list[Timing] = []
    workloads: list[tuple[list[Timing], Callable[[ToolSurface, InstantProvider], Awaitable[Timing]]]] = [
        (loop, _loop),
        (direct, _direct),
    ]
    for _ in range(2):  # warm-up
        for _, work in workloads:
            await work(tools, provider)
    for _ in range(runs):
        for samples, work in workloads:
            samples.append(await work(tools, provider))
    steps = provider.steps + 1  # the tool steps and the answer

    def per_step(samples: list[Timing], which: int) -> float:
        return statistics.median(s[which] for s in samples) / steps * 1000

    figures: dict[str, float | str] = {"tools": name}
    for which, kind in ((0, "wall"), (1, "cpu")):
        loop_ms, direct_ms = per_step(loop, which), per_step(direct, which)
        figures[f"loop_{kind}_ms_per_step"] = round(loop_ms, 4)
        figures[f"direct_{kind}_ms_per_step"] = round(direct_ms, 4)
        figures[f"overhead_{kind}_ms_per_step"] = round(loop_ms - direct_ms, 4)
    return figures


async def main(steps: int, runs: int) -> list[dict[str, float | str]]:
    results = [await _compare("instant", InstantTools(), InstantProvider("bench__echo", {"text": "hi"}, steps), runs)]
    argv = demo_server_argv()
    config = HostConfig(servers=(parse_server("bench", {"command": argv[0], "args": list(argv[1:])}),))
    async with Host(config) as host:
        tools = HostTools(host)
        assert tools.locate("bench__echo") is not None, "the demo server has no echo tool"
        provider = InstantProvider("bench__echo", {"text": "hi"}, steps)
        results.append(await _compare("host (demo server)", tools, provider, runs))
    return results


def _report(results: list[dict[str, float | str]], steps: int, runs: int) -> str:
    lines = [
        f"agent loop overhead per step ({steps} tool steps + 1 answer per run, median of {runs} runs)",
        "",
        f"{'tools':<20} {'':>5} {'loop ms/step':>13} {'direct ms/step':>15} {'overhead ms':>12}  target",
    ]
    for r in results:
        for kind in ("wall", "cpu"):
            overhead = float(r[f"overhead_{kind}_ms_per_step"])
            verdict = "ok" if overhead < TARGET_MS else "MISSED"
            lines.append(
                f"{r['tools'] if kind == 'wall' else '':<20} {kind:>5} {r[f'loop_{kind}_ms_per_step']:>13} "
                f"{r[f'direct_{kind}_ms_per_step']:>15} {overhead:>12}  < {TARGET_MS:g} ms: {verdict}"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=20, help="tool steps per run (default %(default)s)")
    parser.add_argument("--runs", type=int, default=30, help="runs per workload (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    options = parser.parse_args()
    figures = trio.run(main, options.steps, options.runs)
    print(json.dumps(figures, indent=2) if options.json else _report(figures, options.steps, options.runs))
    sys.exit(0)

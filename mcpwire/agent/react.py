"""Text tool mode, for models without native tool calling: the ReAct format.

Theory of operation: the system prompt lists the tools and asks for replies of the form::

    Thought: ...
    Action: <tool name>
    Action Input: {"json": "object"}

or, to answer, ``Thought: ...`` then ``Final Answer: ...``. Requests stop at ``Observation:``
so the model cannot invent a result; the loop calls the tool and sends its result back as a user
turn starting ``Observation:``. :func:`parse_reply` is strict: exactly one ``Action`` naming an
offered tool, followed by ``Action Input`` holding one JSON object (a surrounding code fence is
allowed, nothing else after it), or one non-empty ``Final Answer``, never both. Anything else is a
:class:`Malformed` reply whose ``problem`` goes back to the model as an observation, so a model
that strays from the format is told how, and the run goes on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final

from ..protocol.types import JSONObject
from .messages import ToolSpec

__all__ = [
    "STOP",
    "Action",
    "FinalAnswer",
    "Malformed",
    "ThoughtSplitter",
    "observation",
    "parse_reply",
    "system_prompt",
]

STOP: Final = ("\nObservation:",)
ANSWER_MARK: Final = "Final Answer:"
_LABEL = re.compile(
    r"^[ \t]*(Thought|Action Input|Action|Final Answer|Observation)[ \t]*:", re.IGNORECASE | re.MULTILINE
)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```$", re.DOTALL)

_INSTRUCTIONS: Final = """\
You can use the tools listed below. To use one, reply in exactly this format, then stop:

Thought: why this tool helps
Action: the tool's name, exactly as listed
Action Input: the arguments, as one JSON object on the following lines

The tool's result comes back to you as "Observation: ...". Use one tool per reply. When you can \
answer, reply in exactly this format:

Thought: why you can answer now
Final Answer: the answer for the user

Tools:
"""


@dataclass(frozen=True, slots=True)
class Action:
    name: str
    raw_input: str
    arguments: JSONObject


@dataclass(frozen=True, slots=True)
class FinalAnswer:
    text: str


@dataclass(frozen=True, slots=True)
class Malformed:
    problem: str  #: what was wrong, addressed to the model


def system_prompt(base: str | None, tools: Sequence[ToolSpec]) -> str:
    """``base`` followed by the format's instructions and the tools with their schemas."""
    lines = [_INSTRUCTIONS]
    for tool in tools:
        schema = json.dumps(tool.input_schema, separators=(",", ":"), sort_keys=True)
        lines.append(f"- {tool.name}: {tool.description or '(no description)'}\n  Input schema: {schema}\n")
    if not tools:
        lines.append("(no tools are available: answer directly)\n")
    text = "".join(lines)
    return f"{base.rstrip()}\n\n{text}" if base else text


def observation(text: str) -> str:
    """The user turn that carries a tool's result (or a format problem) back to the model."""
    return f"Observation: {text}"


def parse_reply(text: str, tools: Collection[str]) -> Action | FinalAnswer | Malformed:
    """Reads one reply of the format (see the module's docstring)."""
    labels = [(m.group(1).lower(), m.start(), m.end()) for m in _LABEL.finditer(text)]
    actions = [x for x in labels if x[0] == "action"]
    inputs = [x for x in labels if x[0] == "action input"]
    answers = [x for x in labels if x[0] == "final answer"]
    if answers and actions:
        return Malformed("the reply has both an Action and a Final Answer; give one of them per reply.")
    if answers:
        if len(answers) > 1:
            return Malformed("the reply has more than one Final Answer; give one.")
        answer = text[answers[0][2] :].strip()
        if not answer:
            return Malformed("the Final Answer is empty; write the answer after 'Final Answer:'.")
        return FinalAnswer(answer)
    if not actions:
        return Malformed(
            "the reply has neither 'Action:' with 'Action Input:' nor 'Final Answer:'; reply in the format given."
        )
    if len(actions) > 1 or len(inputs) > 1:
        return Malformed("the reply has more than one Action; use one tool per reply.")
    if not inputs or inputs[0][1] < actions[0][2]:
        return Malformed("the Action has no 'Action Input:' line after it; give the arguments as a JSON object.")
    name = text[actions[0][2] : inputs[0][1]].strip().strip("`'\"").strip()
    if name not in tools:
        offered = ", ".join(sorted(tools)) or "none"
        return Malformed(f"there is no tool named {name!r}; the tools are: {offered}.")
    return _action(name, _input_text(text, inputs[0][2], labels))


def _input_text(text: str, start: int, labels: list[tuple[str, int, int]]) -> str:
    end = min((s for label, s, _ in labels if label == "observation" and s > start), default=len(text))
    raw = text[start:end].strip()
    fenced = _FENCE.match(raw)
    return fenced.group(1).strip() if fenced else raw


def _action(name: str, raw: str) -> Action | Malformed:
    if not raw:
        return Malformed("the Action Input is empty; give the arguments as a JSON object (use {} for none).")
    try:
        value, end = json.JSONDecoder().raw_decode(raw)
    except ValueError as exc:
        return Malformed(f"the Action Input is not valid JSON ({exc}); give one JSON object.")
    if raw[end:].strip():
        return Malformed("the Action Input has text after its JSON object; give the object alone, then stop.")
    if not isinstance(value, dict):
        return Malformed("the Action Input must be a JSON object (use {} for none).")
    return Action(name, raw, value)


class ThoughtSplitter:
    """Splits streamed text into thought (before ``Final Answer:``) and answer (after it),
    holding back just enough characters to see the mark when it is split between chunks."""

    def __init__(self) -> None:
        self._held = ""
        self._answering = False
        self._strip_space = False

    def feed(self, chunk: str) -> list[tuple[str, bool]]:
        """``(text, thought)`` pieces ready to show."""
        if self._answering:
            return self._answer(chunk)
        text = self._held + chunk
        at = text.find(ANSWER_MARK)
        if at >= 0:
            self._held = ""
            self._answering = True
            self._strip_space = True
            head = text[: at + len(ANSWER_MARK)]
            return [(head, True), *self._answer(text[at + len(ANSWER_MARK) :])]
        keep = _partial_mark(text)
        self._held = text[len(text) - keep :] if keep else ""
        ready = text[: len(text) - keep] if keep else text
        return [(ready, True)] if ready else []

    def _answer(self, text: str) -> list[tuple[str, bool]]:
        if self._strip_space:
            text = text.lstrip(" ")
            self._strip_space = not text
        return [(text, False)] if text else []

    def flush(self) -> list[tuple[str, bool]]:
        """What is still held back, once the reply is complete."""
        held, self._held = self._held, ""
        return [(held, True)] if held else []


def _partial_mark(text: str) -> int:
    """How many characters at the end of ``text`` could start the answer mark."""
    for size in range(min(len(ANSWER_MARK) - 1, len(text)), 0, -1):
        if ANSWER_MARK.startswith(text[-size:]):
            return size
    return 0

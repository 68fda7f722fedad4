"""Every result the checker receives, validated against the official schema of its revision (SV-06).

Theory of operation: checks read results for what their own rule is about, and a result can be
wrong in a way no check's rule names (a tool result whose content item has ``"type": "txt"``
passes every check that calls the tool). So every response a wire matches to a request
(:meth:`~.harness.WireBase.wait_response`) is handed to the run's :class:`SchemaAudit` with the
request's method, and validated against the result type of that method in the official
``schema.json`` of the revision under test (:mod:`.schema`).

One defect, one finding: a defect is keyed by the method, the place in the result with array
indexes folded (``content/*``) and what is wrong there, so a tool that returns the same bad item on
every call, in every check that calls it, is one entry with a count. The runner adds the entries of
a revision to that revision's SV-06 result once every check has run (:meth:`SchemaAudit.findings`).

What other checks judge is left to them (the same table SV-06's list validation uses): tool names
and schemas, prompt argument names, template fields, ``resultType`` and caching hints, a tool's
``structuredContent`` (SV-30); ``initialize`` and ``server/discover`` (SV-09, SV-13); error answers
(SV-03).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["Defect", "SchemaAudit", "describe_error", "judged_elsewhere"]

#: methods whose results other checks judge whole
_JUDGED: Final = frozenset({"initialize", "server/discover"})
#: distinct defects kept per revision (a result can be wrong in many ways at once)
MAX_DEFECTS: Final = 20


#: (path item, property) pairs other checks judge: tool names and schemas (SV-29, SV-29c/d),
#: prompt and argument names (PR-01), template uriTemplate and name (RS-03), resultType (SV-16),
#: caching hints (CA-01), a tool's structuredContent (SV-30), a prompt message's role and content
#: (PR-02)
_ELSEWHERE: Final = frozenset(
    {
        ("messages", "role"),
        ("messages", "content"),
        ("tools", "name"),
        ("tools", "inputSchema"),
        ("tools", "outputSchema"),
        ("prompts", "name"),
        ("arguments", "name"),
        ("resourceTemplates", "uriTemplate"),
        ("resourceTemplates", "name"),
        ("", "resultType"),
        ("", "ttlMs"),
        ("", "cacheScope"),
        ("", "structuredContent"),
    }
)


def judged_elsewhere(path: Sequence[str], error: Any) -> bool:
    """Whether another check judges the part of a result that ``error`` (a jsonschema error at
    ``path``) is about."""
    missing = None
    if error.validator == "required":
        match = re.search(r"'([^']+)' is a required property", error.message)
        missing = match.group(1) if match else None
    # the property at fault and the array it sits in (tools/3/inputSchema -> ("tools", "inputSchema"))
    keys = [p for p in path if not p.isdigit()]
    prop = missing or (keys[-1] if keys else "")
    owner = (keys[-2] if len(keys) >= 2 else "") if missing is None else (keys[-1] if keys else "")
    if (owner, prop) in _ELSEWHERE:
        return True
    return any(k in ("inputSchema", "outputSchema", "structuredContent") for k in keys)


def _tag_errors(error: Any) -> list[Any]:
    """The sub-errors of a union saying that a member expected another ``type`` tag."""
    return [
        sub
        for sub in error.context or ()
        if sub.validator == "const" and list(sub.relative_path) == ["type"] and isinstance(sub.validator_value, str)
    ]


def describe_error(error: Any) -> str:
    """What is wrong, in words: an item of a tagged union (content blocks) whose ``type`` no
    member has is named by its tag; one whose member it is, by that member's complaint."""
    instance = error.instance
    if error.validator in ("anyOf", "oneOf") and isinstance(instance, dict) and "type" in instance:
        tags = _tag_errors(error)
        members = error.validator_value if isinstance(error.validator_value, list) else []
        if tags and len(tags) == len(members):
            wanted = ", ".join(repr(t.validator_value) for t in tags)
            return f"type {instance.get('type')!r} is none of {wanted}"
        others = [e for e in error.context or () if e not in tags]
        if others:
            import jsonschema

            best = jsonschema.exceptions.best_match(others)
            if best is not None:
                return f"a {instance.get('type')!r} item: {best.message[:160]}"
    return str(error.message)[:200]


@dataclass(slots=True)
class Defect:
    """One way results of one method break the schema, and how often it was seen."""

    method: str
    definition: str
    where: str
    what: str
    example: str
    count: int = 1

    def line(self) -> str:
        seen = f" ({self.count} results)" if self.count > 1 else ""
        return f"{self.method} result is not a valid {self.definition}: {self.what} at {self.where}{seen}"


@dataclass(slots=True)
class SchemaAudit:
    """The run's schema defects, per revision (see the module docstring)."""

    defects: dict[str, dict[tuple[str, str, str], Defect]] = field(default_factory=dict)
    #: results validated, per revision
    seen: dict[str, int] = field(default_factory=dict)

    def answer(
        self, revision: str, method: str, response: dict[str, Any], params: dict[str, Any] | None = None
    ) -> None:
        """A response to ``method`` (sent with ``params``) in ``revision``: its result is validated
        against the result type of the method (an error is SV-03's). A task-augmented request
        (``params.task``) is answered by a task, not the method's result, and a 2026-07-28 result
        whose ``resultType`` is ``input_required`` by an InputRequiredResult; another
        ``resultType`` is SV-16's to judge."""
        from .context import shown
        from .schema import message_validator, result_definition

        result = response.get("result")
        if method in _JUDGED or not isinstance(result, dict) or (isinstance(params, dict) and "task" in params):
            return
        kind = result.get("resultType")
        if kind not in (None, "complete"):
            if kind != "input_required":
                return
            name: str | None = "InputRequiredResult"
        else:
            name = result_definition(revision, method)
        validator = message_validator(revision, name) if name else None
        if validator is None or name is None:
            return
        self.seen[revision] = self.seen.get(revision, 0) + 1
        found = self.defects.setdefault(revision, {})
        for error in validator.iter_errors(result):
            path = [str(p) for p in error.absolute_path]
            if judged_elsewhere(path, error):
                continue
            where = "/".join("*" if p.isdigit() else p for p in path) or "the result"
            what = describe_error(error)
            key = (method, where, re.sub(r"\d+", "N", what))
            if key in found:
                found[key].count += 1
            elif len(found) < MAX_DEFECTS:
                found[key] = Defect(method, name, where, what, shown(result, 300))

    def findings(self, revision: str) -> list[Defect]:
        """The distinct defects seen in ``revision``, in the order first seen."""
        return list(self.defects.get(revision, {}).values())

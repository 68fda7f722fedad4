"""The Skills extension (``io.modelcontextprotocol/skills``, SEP-2640) for the reference server.

Theory of operation: a :class:`SkillCatalogue` is a small, fixed tree of skill files held in
memory, served under the ``skill://`` scheme (SEP-2640 §Resource Mapping:
``skill://<skill-path>/<file-path>``, the last ``<skill-path>`` segment being the skill's
``name``). From the files it derives everything the extension serves:

- the ``Resource`` of each ``SKILL.md`` for ``resources/list`` (§Resource Metadata: ``mimeType``
  ``text/markdown``, ``name`` and ``description`` from the frontmatter) and the contents of every
  file for ``resources/read``;
- the skill entries of ``skills/list`` and ``skills/get``: the frontmatter as a JSON object (it
  is written into ``SKILL.md`` from that same object, one ``key: <JSON value>`` line per field,
  which YAML reads back identically) and the complete ``resources`` manifest with
  ``sha256:`` digests and byte sizes computed from the bytes that ``resources/read`` returns;
- the directory tree for ``resources/directory/read``: every proper prefix of a file's path
  is a directory resource (``mimeType`` ``inode/directory``, no trailing slash).

Standard library only, like :mod:`mcpwire.testing.demo_server`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "DIRECTORY_MIME",
    "META_PREFIX",
    "SKILLS_EXTENSION",
    "SKILL_SCHEME",
    "SkillCatalogue",
    "SkillFile",
    "default_catalogue",
    "render_skill_md",
]

_Obj = dict[str, Any]

SKILLS_EXTENSION: Final = "io.modelcontextprotocol/skills"
SKILL_SCHEME: Final = "skill://"
SKILL_FILE: Final = "SKILL.md"
#: SEP-2640 §Directory resources: "A directory resource is a resource whose mimeType is inode/directory."
DIRECTORY_MIME: Final = "inode/directory"
_MIME_BY_SUFFIX: Final = {".md": "text/markdown", ".py": "text/x-python", ".txt": "text/plain"}
#: SEP-2640 §Resource Metadata: "When _meta keys are used for skill resources, implementations
#: SHOULD use the io.modelcontextprotocol.skills/ reverse-domain prefix."
META_PREFIX: Final = "io.modelcontextprotocol.skills/"


@dataclass(frozen=True, slots=True)
class SkillFile:
    """One file of a skill: its path under ``skill://`` and its text."""

    path: str
    text: str

    @property
    def uri(self) -> str:
        return SKILL_SCHEME + self.path

    @property
    def data(self) -> bytes:
        return self.text.encode()

    @property
    def mime_type(self) -> str:
        suffix = self.path[self.path.rfind(".") :] if "." in self.path.rsplit("/", 1)[-1] else ""
        return _MIME_BY_SUFFIX.get(suffix, "application/octet-stream")


@dataclass(frozen=True, slots=True)
class _Skill:
    root: str  # the skill path, e.g. "mcpwire/testing/task-polling"
    frontmatter: _Obj
    files: tuple[SkillFile, ...]  # SKILL.md first

    @property
    def uri(self) -> str:
        return f"{SKILL_SCHEME}{self.root}/{SKILL_FILE}"

    def meta(self) -> _Obj:
        """The frontmatter fields beyond name and description, as ``_meta`` of the SKILL.md
        resource ("Servers MAY expose additional frontmatter fields via the resource's _meta")."""
        return {META_PREFIX + k: v for k, v in self.frontmatter.items() if k not in ("name", "description")}


def render_skill_md(frontmatter: Mapping[str, Any], body: str) -> str:
    """A ``SKILL.md``: YAML frontmatter (one ``key: <JSON value>`` line per field), then ``body``.

    JSON scalars and flow collections are YAML too, so a YAML reader gets ``frontmatter`` back
    exactly (SEP-2640 §Frontmatter: "The frontmatter object MUST be identical in content to the
    frontmatter of the SKILL.md it describes").
    """
    lines = [f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in frontmatter.items()]
    return "---\n" + "\n".join(lines) + "\n---\n" + body


class SkillCatalogue:
    """A fixed set of skills and what the extension serves of them.

    Args:
        skills: (skill path, frontmatter, body of SKILL.md, supporting files as
            (path relative to the skill, text)). The last segment of each skill path must be
            the frontmatter ``name`` (checked).

    Raises:
        ValueError: a skill path whose last segment is not its name, or a duplicate file.
    """

    def __init__(self, skills: Sequence[tuple[str, Mapping[str, Any], str, Sequence[tuple[str, str]]]]) -> None:
        built: list[_Skill] = []
        files: dict[str, SkillFile] = {}
        for root, frontmatter, body, supporting in skills:
            root = root.strip("/")
            # SEP-2640: "The final segment of <skill-path> MUST equal the skill's name"
            if root.rsplit("/", 1)[-1] != frontmatter.get("name"):
                raise ValueError(f"skill path {root!r} does not end in its name {frontmatter.get('name')!r}")
            skill_files = [SkillFile(f"{root}/{SKILL_FILE}", render_skill_md(frontmatter, body))]
            skill_files += [SkillFile(f"{root}/{rel.strip('/')}", text) for rel, text in supporting]
            for item in skill_files:
                if item.uri in files:
                    raise ValueError(f"duplicate skill file {item.uri}")
                files[item.uri] = item
            built.append(_Skill(root, dict(frontmatter), tuple(skill_files)))
        self._skills = tuple(built)
        self._files = files
        self._directories: dict[str, set[str]] = {}  # directory uri -> child uris
        for item in files.values():
            parts = item.path.split("/")
            for depth in range(1, len(parts)):
                parent = SKILL_SCHEME + "/".join(parts[:depth])
                self._directories.setdefault(parent, set()).add(SKILL_SCHEME + "/".join(parts[: depth + 1]))

    # -- resources -------------------------------------------------------------------------

    def listed_resources(self) -> list[_Obj]:
        """The ``Resource`` of every ``SKILL.md`` (SEP-2640 §Resource Metadata)."""
        out = []
        for skill in self._skills:
            head = skill.files[0]
            resource: _Obj = {
                "uri": skill.uri,
                "name": skill.frontmatter["name"],
                "description": skill.frontmatter["description"],
                "mimeType": head.mime_type,
                "size": len(head.data),
            }
            if skill.meta():
                resource["_meta"] = skill.meta()
            out.append(resource)
        return out

    def contents(self, uri: str) -> _Obj | None:
        """The ``resources/read`` contents item of a skill file, or None."""
        item = self._files.get(uri)
        if item is None:
            return None
        contents: _Obj = {"uri": uri, "mimeType": item.mime_type, "text": item.text}
        skill = next((s for s in self._skills if s.uri == uri), None)
        if skill is not None and skill.meta():
            contents["_meta"] = skill.meta()
        return contents

    # -- skills/list and skills/get ------------------------------------------------------------

    def entries(self) -> list[_Obj]:
        """Every skill entry, in catalogue order."""
        return [self._entry(skill) for skill in self._skills]

    def entry(self, uri: str) -> _Obj | None:
        """The entry of the skill whose ``SKILL.md`` is ``uri``, or None."""
        skill = next((s for s in self._skills if s.uri == uri), None)
        return None if skill is None else self._entry(skill)

    @staticmethod
    def _entry(skill: _Skill) -> _Obj:
        # SEP-2640 §Resources: complete, each file once, the SKILL.md entry included; digests are
        # "sha256:{hex}" of the raw bytes and size is their length.
        manifest = [
            {"uri": f.uri, "digest": "sha256:" + hashlib.sha256(f.data).hexdigest(), "size": len(f.data)}
            for f in skill.files
        ]
        return {"uri": skill.uri, "frontmatter": dict(skill.frontmatter), "resources": manifest}

    # -- resources/directory/read --------------------------------------------------------------

    def children(self, uri: str) -> list[_Obj] | None:
        """The direct children of a directory resource (sorted by URI), or None when ``uri`` is
        not a directory (a file, or nothing at all)."""
        kids = self._directories.get(uri.rstrip("/") if uri.startswith(SKILL_SCHEME) else uri)
        if kids is None:
            return None
        out: list[_Obj] = []
        for child in sorted(kids):
            name = child.rsplit("/", 1)[-1]
            item = self._files.get(child)
            if item is None:
                out.append({"uri": child, "name": name, "mimeType": DIRECTORY_MIME})
            else:
                out.append({"uri": child, "name": name, "mimeType": item.mime_type, "size": len(item.data)})
        return out


_TOUR_BODY: Final = """# A tour of the mcpwire reference server

Use this skill to find the part of the reference server that exercises a feature of MCP.

1. Tools: read `references/TOOLS.md` for what each tool does; `echo` and `add` are the simplest.
2. Long work: `slow_compute` runs as a task when the request declares the
   `io.modelcontextprotocol/tasks` extension; see `examples/tasks/slow-compute.md`.
3. Resources: `test://static-text` is plain text, `test://static-binary` a PNG.
4. Prompts: `test_simple_prompt` takes no arguments; `greet` takes a `name`.
"""

_TOOLS_MD: Final = """# Tools of the reference server

| Tool | What it shows |
| --- | --- |
| `echo` | a plain text result |
| `add` | structured content that matches an output schema |
| `slow` | progress notifications and cancellation |
| `ask`, `sample`, `roots` | input from the client (elicitation, sampling, roots) |
| `greet` | a tool that never becomes a task |
| `slow_compute`, `confirm_delete`, `multi_input` | tools that may become tasks |
| `failing_job`, `protocol_error_job`, `test_tool_with_task` | tools that only run as tasks |
"""

_ECHO_MD: Final = """# Example: echo

Call `tools/call` with `{"name": "echo", "arguments": {"text": "hello"}}`; the result is one text
block with `hello`.
"""

_SLOW_MD: Final = """# Example: slow_compute as a task

1. Call `slow_compute` with `{"seconds": 2}` and the tasks extension in the request's client
   capabilities: the result has `resultType: "task"` and a `taskId`.
2. Poll `tasks/get` with that `taskId` every `pollIntervalMs` until the status is `completed`.
3. The tool's result is inlined in the completed task under `result`.
"""

_POLLING_BODY: Final = """# Driving a task to its end

1. Send the request with `io.modelcontextprotocol/tasks` declared; keep the `taskId` of a
   `resultType: "task"` answer.
2. Poll `tasks/get`. On `input_required`, answer every entry of `inputRequests` with
   `tasks/update` (`inputResponses`, by the same keys); each key is asked once.
3. Stop at `completed` (the result is inlined), `failed` (the error is inlined) or `cancelled`.
4. To give up, send `tasks/cancel`; never `notifications/cancelled`.

See `checklist.md` before relying on a server's tasks.
"""

_CHECKLIST_MD: Final = """# Checklist

- The server lists `io.modelcontextprotocol/tasks` under `capabilities.extensions` of `server/discover`.
- `tasks/get` on an unknown `taskId` is `-32602`.
- `tasks/cancel` and `tasks/update` answer with an empty result.
"""


def default_catalogue() -> SkillCatalogue:
    """The reference server's skills: ``skill://reference-tour`` (with nested directories) and
    ``skill://mcpwire/testing/task-polling`` (a skill under an organizational prefix)."""
    return SkillCatalogue(
        [
            (
                "reference-tour",
                {
                    "name": "reference-tour",
                    "description": "Find the part of the mcpwire reference server that exercises a given MCP feature.",
                    "license": "MIT",
                    "metadata": {"version": "1.0"},
                },
                _TOUR_BODY,
                [
                    ("references/TOOLS.md", _TOOLS_MD),
                    ("examples/echo.md", _ECHO_MD),
                    ("examples/tasks/slow-compute.md", _SLOW_MD),
                ],
            ),
            (
                "mcpwire/testing/task-polling",
                {
                    "name": "task-polling",
                    "description": "Drive a task of the io.modelcontextprotocol/tasks extension to its end.",
                },
                _POLLING_BODY,
                [("checklist.md", _CHECKLIST_MD)],
            ),
        ]
    )

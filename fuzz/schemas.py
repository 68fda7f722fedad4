"""Hypothesis strategies for tool arguments, driven by each tool's ``inputSchema``.

Theory of operation: :func:`valid_arguments` walks a JSON Schema (draft 2020-12, with the
draft-07 spellings tools still use) and builds a strategy for the keywords it meets: ``type``
(including lists of types), ``enum``/``const``, string bounds, ``pattern`` and common
``format`` values, ``examples``, number bounds (exclusive ones too, draft-04 booleans included)
and ``multipleOf``, array ``items`` (list form too) / ``prefixItems`` / ``additionalItems`` /
bounds / ``uniqueItems`` / ``contains`` with ``minContains``, object ``properties`` /
``required`` / ``additionalProperties`` / ``patternProperties`` / ``propertyNames`` /
``minProperties`` / ``dependentRequired`` (and draft-07 ``dependencies``), ``$ref`` to
``#/$defs`` and ``#/definitions`` or any JSON pointer (resolved in the document itself; a remote
``$ref`` is never fetched; recursive references stop at a depth), ``allOf``/``anyOf``/
``oneOf``. What is only approximated (``not``, ``if``/``then``/``else``,
``dependentSchemas``, ``maxProperties``, ``maxContains``, formats the checker knows) is made
exact by filtering the top-level value through a ``jsonschema`` validator with retrieval
disabled and format checking on, so every "valid" example really is valid.

Strategies are ordered so that Hypothesis shrinks toward the simplest input: the plain
``integers()``/``text()`` branch comes first (``0``, ``-1``, ``""``), the extremes (huge ids,
long strings, NUL and other awkward characters) after it. A string is plain text only one time
in five or six: the other branches are one awkward character (NUL, U+2028, a lone surrogate,
...) alone or inside plain text, a run of awkward characters, and long runs of one character, so
a tool's default budget of 100 examples meets each kind whatever the seed.
:func:`invalid_arguments` produces near-valid inputs: one property of the wrong type, a required
property missing, arguments that are not an object, deep nesting and huge strings;
:func:`arguments` mixes one invalid example in three into the valid ones.

``hypothesis-jsonschema`` would be the natural library here, but its latest release (0.23.1)
fails on every object schema with current Hypothesis (``AttributeError: 'many' object has no
attribute 'more'``: it calls an internal that was removed), and it supports drafts 4 to 7 only
(tool schemas are 2020-12 by default: ``prefixItems``, ``$defs``, ``dependentRequired``), so
this module keeps its own, smaller walker.
"""

from __future__ import annotations

import base64
import logging
import math
import string
from typing import Any

import jsonschema
import referencing
import referencing.exceptions
import referencing.jsonschema
from hypothesis import strategies as st

__all__ = [
    "MAX_DEPTH",
    "SchemaError",
    "Walker",
    "arguments",
    "invalid_arguments",
    "is_valid",
    "schema_problem",
    "valid_arguments",
    "validator_for",
]

log = logging.getLogger("mcpwire.fuzz.schemas")

MAX_DEPTH = 6
#: past this depth a (recursive) reference is not followed any more: optional parts are left out
HARD_DEPTH = 3 * MAX_DEPTH
#: Characters that break naive servers: NUL, controls, quotes, separators, non-BMP, RTL, and lone
#: surrogates (legal in a JSON string as ``\uXXXX`` escapes, which is how :func:`~fuzz.exchange.dumps`
#: writes them; a server that decodes them may fail to encode them again).
AWKWARD_CHARS = "\x00\u2028\ud800\x01\x1f\x7f\n\r\t\"'\\/<>&%{}\u2029\u200b\u202e\ufeff\uffff\udfff\u00e9\U0001f600"
#: The sharpest of them, drawn on their own or inside plain text (shrinking ends at the first: NUL).
SHARP_CHARS = '\x00\u2028\ud800\n"\\\u202e\U0001f600'
#: The characters of the long runs (one character repeated up to :data:`LONG_STRING_MAX` times).
LONG_CHARS = "a\x00\u2028\u00e9"
EXTREME_INTS = (2**31 - 1, -(2**31), 2**31, 2**53, 2**53 + 1, -(2**53) - 1, 2**63 - 1, -(2**63), 2**64)
LONG_STRING_MAX = 20_000
JSON_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")

JSON = Any


class SchemaError(ValueError):
    """The schema cannot be turned into a strategy (an unsatisfiable or remote ``$ref``)."""


def _no_retrieve(uri: str) -> referencing.Resource[Any]:
    # Tool schemas are resolved in the document itself, never over the network.
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


def is_valid(validator: jsonschema.protocols.Validator, value: JSON) -> bool:
    """``validator.is_valid`` that treats a value too deep to check as invalid."""
    try:
        return bool(validator.is_valid(value))
    except RecursionError:
        return False


def schema_problem(schema: JSON) -> str | None:
    """Why ``schema`` is not a valid JSON Schema of its draft (2020-12 by default), or ``None``."""
    if not isinstance(schema, dict):
        return f"not an object but {type(schema).__name__}"
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        return f"at /{where}: {exc.message[:200]}"
    except RecursionError:
        return "too deeply nested to check"
    return None


def validator_for(schema: JSON) -> jsonschema.protocols.Validator:
    """A validator for ``schema`` (its ``$schema`` or 2020-12) that never retrieves remote refs."""
    registry: referencing.Registry[Any] = referencing.Registry(retrieve=_no_retrieve)  # type: ignore[call-arg]
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, registry=registry, format_checker=cls.FORMAT_CHECKER)


# -- primitives ---------------------------------------------------------------------------------

_json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
any_json: st.SearchStrategy[JSON] = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)

_FORMATS: dict[str, st.SearchStrategy[str]] = {
    "email": st.emails(),
    "uri": st.sampled_from(["https://example.com/", "file:///tmp/x", "urn:x:y"]),
    "uri-reference": st.sampled_from(["/a/b", "https://example.com/", "#frag"]),
    "url": st.sampled_from(["https://example.com/", "http://127.0.0.1:9/x"]),
    "date-time": st.datetimes().map(lambda d: d.isoformat() + "Z"),
    "date": st.dates().map(lambda d: d.isoformat()),
    "time": st.times().map(lambda t: t.isoformat() + "Z"),
    "uuid": st.uuids().map(str),
    "ipv4": st.ip_addresses(v=4).map(str),
    "ipv6": st.ip_addresses(v=6).map(str),
    "hostname": st.sampled_from(["localhost", "example.com", "a.b.c"]),
    "idn-hostname": st.sampled_from(["localhost", "bücher.example", "例え.jp"]),
    "idn-email": st.sampled_from(["a@example.com", "üser@bücher.example"]),
    "iri": st.sampled_from(["https://example.com/ü", "urn:x:y"]),
    "iri-reference": st.sampled_from(["/ü/b", "#frag"]),
    "uri-template": st.sampled_from(["https://example.com/{id}", "file:///{path}", "/a/{b}{?c}"]),
    "json-pointer": st.sampled_from(["", "/a", "/a/0", "/a~1b"]),
    "relative-json-pointer": st.sampled_from(["0", "1/a", "2#"]),
    "regex": st.sampled_from(["^a+$", "[0-9]{2}", ".*"]),
    "duration": st.sampled_from(["P1D", "PT1H", "P1Y2M3DT4H5M6S"]),
    "byte": st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode()),
}


def _strings(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt in _FORMATS:
        return _FORMATS[fmt]
    given_examples = schema.get("examples")
    examples = [e for e in given_examples if isinstance(e, str)] if isinstance(given_examples, list) else []
    lo = int(schema.get("minLength", 0))
    hi_raw = schema.get("maxLength")
    hi = int(hi_raw) if isinstance(hi_raw, int | float) else None
    if isinstance(schema.get("pattern"), str):
        try:
            return st.from_regex(schema["pattern"]).filter(lambda s: lo <= len(s) and (hi is None or len(s) <= hi))
        except Exception:  # an ECMA-only construct Python's re rejects: fall back to filtered text
            log.debug("pattern %r not usable as a Python regex", schema["pattern"])
    plain = st.text(min_size=lo, max_size=hi if hi is not None else max(lo, 40))
    options: list[st.SearchStrategy[str]] = [plain, *([st.sampled_from(examples)] if examples else [])]
    if hi is None or hi >= 1:

        def fit(text: str) -> str:
            text = text + "a" * (lo - len(text))  # padded past minLength with a harmless letter
            return text if hi is None else text[:hi]

        # The awkward characters are drawn often (most strings that break a server break it on one
        # character): one sharp character alone, one inside plain text, a run of awkward ones.
        sharp = st.sampled_from(SHARP_CHARS)
        options.append(sharp.map(fit))
        options.append(st.tuples(st.text(max_size=6), sharp, st.text(max_size=6)).map(lambda t: fit("".join(t))))
        options.append(
            st.text(alphabet=AWKWARD_CHARS, min_size=max(lo, 1), max_size=hi if hi is not None else max(lo, 8))
        )
    top = min(hi if hi is not None else LONG_STRING_MAX, LONG_STRING_MAX)
    if top > max(lo, 40):
        # a long run of one character: integer shrinking finds the exact length boundary; a second
        # branch draws only runs of a few hundred characters and more, so long strings come often
        def run(lengths: st.SearchStrategy[int]) -> st.SearchStrategy[str]:
            return st.tuples(st.sampled_from(LONG_CHARS), lengths).map(lambda cn: cn[0] * cn[1])

        options.append(run(st.integers(min_value=max(lo, 1), max_value=top)))
        options.append(run(st.integers(min_value=max(lo, 1, min(top, 256)), max_value=top)))
    return st.one_of(options)


def _numbers(schema: dict[str, Any], integer: bool) -> st.SearchStrategy[int | float]:
    lo = schema.get("minimum")
    hi = schema.get("maximum")
    xlo = schema.get("exclusiveMinimum")
    xhi = schema.get("exclusiveMaximum")
    if isinstance(xlo, bool):  # draft-04 spelling
        xlo = lo if xlo else None
        lo = None if xlo is not None else lo
    if isinstance(xhi, bool):
        xhi = hi if xhi else None
        hi = None if xhi is not None else hi
    mult = schema.get("multipleOf")
    if integer:
        ilo = None if lo is None else math.ceil(lo)
        ihi = None if hi is None else math.floor(hi)
        if xlo is not None:
            ilo = max(ilo if ilo is not None else -(10**30), math.floor(xlo) + 1)
        if xhi is not None:
            ihi = min(ihi if ihi is not None else 10**30, math.ceil(xhi) - 1)
        if isinstance(mult, int) and mult > 0:
            qlo = None if ilo is None else -((-ilo) // mult)
            qhi = None if ihi is None else ihi // mult
            return st.integers(qlo, qhi).map(lambda q: q * mult)
        base: st.SearchStrategy[int | float] = st.integers(ilo, ihi)
        extremes = [v for v in EXTREME_INTS + tuple(-v for v in EXTREME_INTS) if _within(v, ilo, ihi)]
        return base | st.sampled_from(extremes) if extremes else base
    floats = st.floats(
        min_value=lo if lo is not None else xlo,
        max_value=hi if hi is not None else xhi,
        exclude_min=xlo is not None and lo is None,
        exclude_max=xhi is not None and hi is None,
        allow_nan=False,
        allow_infinity=False,
    )
    ints = _numbers({**schema, "multipleOf": None}, True)
    if isinstance(mult, int | float) and mult > 0:
        return ints.filter(lambda v: (v / mult) == int(v / mult))
    return ints | floats


def _within(value: int, lo: int | None, hi: int | None) -> bool:
    return (lo is None or value >= lo) and (hi is None or value <= hi)


# -- the walker ---------------------------------------------------------------------------------


class Walker:
    """Builds a strategy for a schema whose ``$ref`` resolve inside ``root`` (see the module docstring)."""

    def __init__(self, root: JSON) -> None:
        self.root = root

    def resolve(self, ref: str) -> JSON:
        if not ref.startswith("#"):
            raise SchemaError(f"remote $ref {ref!r} is not fetched")
        node: JSON = self.root
        for part in ref[1:].lstrip("/").split("/") if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise SchemaError(f"$ref {ref!r} does not resolve in the tool's schema")
        return node

    def build(self, schema: JSON, depth: int = 0) -> st.SearchStrategy[JSON]:
        if depth > HARD_DEPTH:
            return st.nothing()  # a recursive $ref: optional parts end here, required ones are unsatisfiable
        if schema is True or schema == {}:
            return any_json if depth < MAX_DEPTH else _json_scalars
        if schema is False:
            return st.nothing()
        if not isinstance(schema, dict):
            return any_json
        if "$ref" in schema:
            # 2020-12 allows siblings next to $ref: the top-level filter enforces them
            return self.build(self.resolve(schema["$ref"]), depth + 1)
        if "const" in schema:
            return st.just(schema["const"])
        if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
            return st.sampled_from(schema["enum"])
        if "allOf" in schema and isinstance(schema["allOf"], list):
            merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                part = self.resolve(part["$ref"]) if isinstance(part, dict) and "$ref" in part else part
                if isinstance(part, dict):
                    for key, value in part.items():
                        if key == "properties" and isinstance(merged.get("properties"), dict):
                            merged["properties"] = {**merged["properties"], **value}
                        elif key == "required" and isinstance(merged.get("required"), list):
                            merged["required"] = [*merged["required"], *value]
                        else:
                            merged.setdefault(key, value)
            return self.build(merged, depth)
        for key in ("anyOf", "oneOf"):
            if key in schema and isinstance(schema[key], list) and schema[key]:
                rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
                return st.one_of([self.build({**rest, **b} if isinstance(b, dict) else b, depth) for b in schema[key]])
        types = schema.get("type")
        if isinstance(types, list):
            return st.one_of([self.build({**schema, "type": t}, depth) for t in types if t in JSON_TYPES])
        if types is None:
            types = self._infer_type(schema)
            if types is None:
                return any_json if depth < MAX_DEPTH else _json_scalars
        if types == "null":
            return st.none()
        if types == "boolean":
            return st.booleans()
        if types == "integer":
            return _numbers(schema, True)
        if types == "number":
            return _numbers(schema, False)
        if types == "string":
            return _strings(schema)
        if types == "array":
            return self._array(schema, depth)
        if types == "object":
            return self._object(schema, depth)
        return st.nothing()

    @staticmethod
    def _infer_type(schema: dict[str, Any]) -> str | None:
        object_words = {"properties", "required", "additionalProperties", "patternProperties", "propertyNames"}
        if object_words & schema.keys() or {"minProperties", "dependentRequired"} & schema.keys():
            return "object"
        if {"items", "prefixItems", "minItems", "maxItems", "contains"} & schema.keys():
            return "array"
        if {"minLength", "maxLength", "pattern", "format"} & schema.keys():
            return "string"
        if {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"} & schema.keys():
            return "number"
        return None

    def _array(self, schema: dict[str, Any], depth: int) -> st.SearchStrategy[JSON]:
        lo = int(schema.get("minItems", 0))
        hi = schema.get("maxItems")
        hi = int(hi) if isinstance(hi, int | float) else max(lo, 5)
        items = schema.get("items", {})
        if depth >= MAX_DEPTH:
            lo = hi = lo
        prefix = schema.get("prefixItems")
        if isinstance(items, list):  # draft-07 tuple form
            prefix, items = items, schema.get("additionalItems", {})
        element = self.build(items, depth + 1)
        unique = bool(schema.get("uniqueItems"))
        if isinstance(prefix, list) and prefix:
            head = st.tuples(*[self.build(p, depth + 1) for p in prefix]).map(list)
            tail = st.lists(element, max_size=max(0, hi - len(prefix))) if items is not False else st.just([])
            return st.tuples(head, tail).map(lambda ht: ht[0] + ht[1])
        plain = st.lists(element, min_size=lo, max_size=hi, unique_by=_canonical if unique else None)
        if "contains" in schema:
            # at least minContains (default 1) items match "contains"; maxContains is left to the filter
            need = int(schema.get("minContains", 1))
            matching = st.lists(self.build(schema["contains"], depth + 1), min_size=need, max_size=max(need, 2))
            rest = st.lists(element, max_size=max(0, hi - need))
            return st.tuples(matching, rest).map(lambda mr: mr[0] + mr[1])
        return plain

    def _object(self, schema: dict[str, Any], depth: int) -> st.SearchStrategy[JSON]:
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        required = [r for r in schema.get("required", []) if isinstance(r, str)]
        req = {name: self.build(props.get(name, {}), depth + 1) for name in required}
        opt = {name: self.build(sub, depth + 1) for name, sub in props.items() if name not in req}
        base: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(req, optional=opt)
        dependent = schema.get("dependentRequired")
        if not isinstance(dependent, dict):  # draft-07 spelling: "dependencies" with lists of names
            deps = schema.get("dependencies")
            dependent = {k: v for k, v in deps.items() if isinstance(v, list)} if isinstance(deps, dict) else {}
        if dependent:
            base = self._with_dependents(base, dependent, props, depth)
        extra_schema = schema.get("additionalProperties", {})
        patterns = schema.get("patternProperties")
        patterns = patterns if isinstance(patterns, dict) else {}
        at_least = max(0, int(schema.get("minProperties", 0)) - len(required))
        if depth >= MAX_DEPTH or schema.get("unevaluatedProperties") is False:
            return base
        known = set(props)
        extras: list[st.SearchStrategy[dict[str, Any]]] = []
        for pattern, sub in patterns.items():
            try:
                keys = st.from_regex(str(pattern)).filter(lambda n: n not in known)
            except Exception:  # an ECMA-only pattern: no keys of that kind (the filter keeps it exact)
                continue
            extras.append(st.dictionaries(keys, self.build(sub, depth + 1), max_size=2))
        if extra_schema is not False:
            name_schema = schema.get("propertyNames")
            if isinstance(name_schema, dict) and name_schema:
                names = self.build({"type": "string", **name_schema}, depth + 1).filter(
                    lambda n: isinstance(n, str) and n not in known
                )
            else:
                names = st.text(alphabet=string.ascii_letters + "_", min_size=1, max_size=8).filter(
                    lambda n: n not in known
                )
            values = self.build(extra_schema, depth + 1)
            extras.append(st.dictionaries(names, values, min_size=at_least, max_size=max(2, at_least)))
        if not extras:
            return base

        def merge(parts: tuple[dict[str, Any], ...]) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for part in parts[1:]:
                out.update(part)
            out.update(parts[0])
            return out

        return st.tuples(base, *extras).map(merge)

    def _with_dependents(
        self,
        base: st.SearchStrategy[dict[str, Any]],
        dependent: dict[str, Any],
        props: dict[str, Any],
        depth: int,
    ) -> st.SearchStrategy[dict[str, Any]]:
        """``dependentRequired``: when a property is present, the ones it names are drawn too."""
        fill = {
            name: self.build(props.get(name, {}), depth + 1)
            for names in dependent.values()
            if isinstance(names, list)
            for name in names
            if isinstance(name, str)
        }

        @st.composite
        def draw(draw_: st.DrawFn) -> dict[str, Any]:
            value = dict(draw_(base))
            changed = True
            while changed:
                changed = False
                for trigger, names in dependent.items():
                    if trigger in value and isinstance(names, list):
                        for name in names:
                            if isinstance(name, str) and name not in value:
                                value[name] = draw_(fill[name])
                                changed = True
            return value

        return draw()


def _canonical(value: JSON) -> str:
    import json

    return json.dumps(value, sort_keys=True)


def valid_arguments(schema: JSON) -> st.SearchStrategy[JSON]:
    """Arguments that validate against the tool's ``inputSchema`` (exact: filtered by a validator)."""
    validator = validator_for(schema)
    return Walker(schema).build(schema).filter(lambda v: is_valid(validator, v))


def _wrong_type_value(sub: JSON) -> st.SearchStrategy[JSON]:
    declared = sub.get("type") if isinstance(sub, dict) else None
    allowed = set(declared if isinstance(declared, list) else [declared] if declared else [])
    if "number" in allowed:
        allowed.add("integer")
    samples: dict[str, st.SearchStrategy[JSON]] = {
        "null": st.none(),
        "boolean": st.booleans(),
        "integer": st.integers(),
        "string": st.text(max_size=10),
        "array": st.lists(st.integers(), max_size=2),
        "object": st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    }
    wrong = [s for t, s in samples.items() if t not in allowed and not (t == "integer" and "number" in allowed)]
    return st.one_of(wrong) if wrong else st.nothing()


def _deep(depth: int) -> JSON:
    from .exchange import Deep

    return Deep(depth)


def invalid_arguments(schema: JSON) -> st.SearchStrategy[JSON]:
    """Near-valid arguments that do *not* validate: the server must refuse them, not crash or hang."""
    validator = validator_for(schema)
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    props = props if isinstance(props, dict) else {}
    required = [r for r in schema.get("required", []) if isinstance(r, str)] if isinstance(schema, dict) else []
    valid = valid_arguments(schema)
    options: list[st.SearchStrategy[JSON]] = []
    if props:

        @st.composite
        def wrong_type(draw: st.DrawFn) -> JSON:
            base = dict(draw(valid))
            name = draw(st.sampled_from(sorted(props)))
            base[name] = draw(_wrong_type_value(props[name]))
            return base

        options.append(wrong_type())
    if required:

        @st.composite
        def missing(draw: st.DrawFn) -> JSON:
            base = dict(draw(valid))
            base.pop(draw(st.sampled_from(required)), None)
            return base

        options.append(missing())
    options.append(st.none() | st.integers() | st.text(max_size=5) | st.lists(st.integers(), max_size=2))
    near = st.one_of(options).filter(lambda v: not is_valid(validator, v))
    if not props:
        return near
    # deep nesting (not validated: checking it would recurse as deep as the server's parser)
    deep = st.tuples(st.sampled_from(sorted(props)), st.integers(min_value=64, max_value=3000)).map(
        lambda nd: {nd[0]: _deep(nd[1])}
    )
    return near | deep


def arguments(schema: JSON) -> st.SearchStrategy[tuple[bool, JSON]]:
    """``(valid, arguments)``: mostly valid examples (two in three; they shrink first), sometimes invalid ones."""
    try:
        valid = valid_arguments(schema)
    except SchemaError:
        log.info("inputSchema not usable for valid arguments; only non-object arguments are generated")
        return (st.none() | st.integers() | st.text(max_size=5)).map(lambda v: (False, v))
    invalid = invalid_arguments(schema)

    @st.composite
    def case(draw: st.DrawFn) -> tuple[bool, JSON]:
        # a drawn choice, not ``valid | invalid``: one_of weighs its branches after flattening them,
        # and the invalid side has many (one per kind of breakage), so valid examples would be few
        if draw(st.integers(min_value=0, max_value=2), label="invalid") < 2:
            return True, draw(valid)
        return False, draw(invalid)

    return case()

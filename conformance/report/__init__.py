"""Reports of a :class:`~conformance.model.Run`: terminal, JSON, JUnit XML and HTML.

Theory of operation: every report is a pure function of the run; nothing here runs a check or
touches a file. One module per format (:mod:`.terminal`, :mod:`.json_report`, :mod:`.junit`,
:mod:`.html`) over the shared views of :mod:`.views`. The evidence a result carries is structured
(:class:`~conformance.evidence.ExchangeEntry`, HTTP exchange dictionaries) and was redacted once
when it was collected; the reports only escape it for their format. Much of the text comes from
the server under test, so every report treats text as hostile: the terminal gets no control
characters, XML no character XML 1.0 forbids, HTML is escaped everywhere.
"""

from __future__ import annotations

from .html import MAX_PAYLOAD_CHARS, MAX_PAYLOAD_LINES, MAX_STRING_CHARS, index_html, to_html
from .json_report import (
    FORMAT_NAME,
    JSON_SCHEMA,
    MULTI_FORMAT_NAME,
    SCHEMA_VERSION,
    dumps,
    multi_exit_code,
    multi_to_dict,
    to_dict,
    to_json,
)
from .junit import multi_to_junit, to_junit
from .terminal import ProgressBar, matrix_text, progress_line, to_terminal
from .views import AREAS, area_of, grouped, skip_reasons

__all__ = [
    "AREAS",
    "FORMAT_NAME",
    "JSON_SCHEMA",
    "MAX_PAYLOAD_CHARS",
    "MAX_PAYLOAD_LINES",
    "MAX_STRING_CHARS",
    "MULTI_FORMAT_NAME",
    "SCHEMA_VERSION",
    "ProgressBar",
    "area_of",
    "dumps",
    "grouped",
    "index_html",
    "matrix_text",
    "multi_exit_code",
    "multi_to_dict",
    "multi_to_junit",
    "progress_line",
    "skip_reasons",
    "to_dict",
    "to_html",
    "to_json",
    "to_junit",
    "to_terminal",
]

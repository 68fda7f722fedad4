"""Fuzzing for mcpwire: the server fuzzer behind ``mcpwire fuzz``, and property tests of mcpwire itself.

- The server fuzzer: :mod:`fuzz.cli` (``main(argv)``, also ``python -m fuzz``), :mod:`fuzz.runner`
  (the run's config and report, learning the server), :mod:`fuzz.schedule` (units in rounds within
  the budget) with :mod:`fuzz.budget`, :mod:`fuzz.units`, :mod:`fuzz.attempt` and
  :mod:`fuzz.findings`; :mod:`fuzz.schemas` (tool arguments from ``inputSchema``),
  :mod:`fuzz.mcp_schema` (the official schema of each revision), :mod:`fuzz.messages` (protocol
  messages valid for a revision, mutations, framing), :mod:`fuzz.stateful` (a rule-based machine
  over a live server), :mod:`fuzz.oracles` (what a server must do, with spec references),
  :mod:`fuzz.exchange`, :mod:`fuzz.wire` (stdio) and :mod:`fuzz.http_wire` (Streamable HTTP,
  HTTP+SSE): the raw exchange; :mod:`fuzz.trace` (JSONL traces, generated pytest files, replay).
- Property tests of the sans-I/O core: ``core_properties``. Run them with ``python -m pytest fuzz``
  (they also run under ``tests/`` through ``tests/protocol/test_properties.py`` and
  ``tests/fuzz/test_core_extra.py``).
  ``MCPWIRE_FUZZ_EXAMPLES=5000 MCPWIRE_FUZZ_RANDOM=1`` turns the deterministic CI run into a longer,
  randomised one.
"""

"""Fuzzing for mcpwire: property tests of the sans-I/O core (``core_properties``).

Run them with ``python -m pytest fuzz`` (they also run under ``tests/`` through
``tests/protocol/test_properties.py``). ``MCPWIRE_FUZZ_EXAMPLES=5000 MCPWIRE_FUZZ_RANDOM=1``
turns the deterministic CI run into a longer, randomised one.
"""

"""Fixtures of the console's tests: one headless Chromium per test module (Playwright for Python,
driving Debian's chromium; nothing is downloaded)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _console import CHROMIUM, CHROMIUM_ARGS, require


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require(CHROMIUM)
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()

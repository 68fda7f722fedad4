"""Fixtures of the agent tests: the scripted provider on loopback."""

from __future__ import annotations

import pytest
import trio
from _agent_fake_llm import FakeLLM


@pytest.fixture
async def llm(nursery: trio.Nursery) -> FakeLLM:
    fake = FakeLLM()
    await nursery.start(fake.serve)
    return fake

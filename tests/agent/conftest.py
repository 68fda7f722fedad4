"""Fixtures of the agent tests: the scripted provider on loopback, and the service tests'
databases (a real PostgreSQL, an empty database on each backend) for the stored conversations."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio
from _agent_fake_llm import FakeLLM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
from _stores import db_url, postgres

__all__ = ["db_url", "llm", "postgres"]  # the shared fixtures are offered here


@pytest.fixture
async def llm(nursery: trio.Nursery) -> FakeLLM:
    fake = FakeLLM()
    await nursery.start(fake.serve)
    return fake

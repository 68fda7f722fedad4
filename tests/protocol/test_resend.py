"""The re-send table: each outcome's step and bound, counted per call and per outcome."""

from __future__ import annotations

import pytest

from mcpwire.protocol.resend import RESEND, Outcome, Step, next_step


def test_an_answer_is_returned_and_a_failure_raised() -> None:
    assert next_step(Outcome.ANSWERED, {}) is Step.RETURN
    assert next_step(Outcome.FAILED, {}) is Step.RAISE


@pytest.mark.parametrize(
    ("outcome", "step"),
    [
        (Outcome.STREAM_LOST, Step.REISSUE),
        (Outcome.SESSION_EXPIRED, Step.RENEW_SESSION),
        (Outcome.HEADER_MISMATCH, Step.RELIST_TOOLS),
        (Outcome.UNSUPPORTED_REVISION, Step.SWITCH_REVISION),
    ],
)
def test_each_loss_is_mended_once_per_call(outcome: Outcome, step: Step) -> None:
    """HT-M12, HT-L12, HT-M09, LC-24: one re-send each; the same outcome again is raised."""
    counts: dict[Outcome, int] = {}
    assert next_step(outcome, counts) is step
    assert counts == {outcome: 1}
    assert next_step(outcome, counts) is Step.RAISE
    assert counts == {outcome: 1}


def test_bounds_count_per_outcome() -> None:
    """A call whose stream broke once may still renew an expired session once, and so on."""
    counts: dict[Outcome, int] = {}
    assert next_step(Outcome.STREAM_LOST, counts) is Step.REISSUE
    assert next_step(Outcome.SESSION_EXPIRED, counts) is Step.RENEW_SESSION
    assert next_step(Outcome.STREAM_LOST, counts) is Step.RAISE


def test_input_rounds_are_bounded_by_the_caller() -> None:
    """UT-R02..UT-R07: input rounds up to ``max_input_rounds``, then the request fails."""
    counts: dict[Outcome, int] = {}
    steps = [next_step(Outcome.INPUT_REQUIRED, counts, input_rounds=3) for _ in range(4)]
    assert steps == [Step.FULFIL_INPUT] * 3 + [Step.RAISE]


def test_every_rule_names_its_source() -> None:
    assert all(rule.source for rule in RESEND.values())
    assert set(RESEND) == set(Outcome) - {Outcome.ANSWERED, Outcome.FAILED}

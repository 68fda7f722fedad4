"""The re-send tables: each outcome's step and bound, counted per call and per outcome; which HTTP
statuses send a POST again, after how long."""

from __future__ import annotations

import pytest

from mcpwire.protocol.resend import (
    MAX_RETRY_AFTER,
    RESEND,
    STATUS_RESEND,
    Outcome,
    Resend,
    Step,
    next_step,
    status_resend,
)


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


# -- HTTP statuses ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "retry_after", "idempotent", "remaining", "step"),
    [
        (503, None, False, None, Resend(None)),  # not processed: any message, after a backoff
        (503, 2.0, False, 10.0, Resend(2.0)),
        (429, 2.0, False, None, Resend(2.0)),
        (429, None, True, None, None),  # a 429 says when to come back, or nothing is sent again
        (429, 0.0, False, 1.0, Resend(0.0)),
        (429, MAX_RETRY_AFTER, False, None, Resend(MAX_RETRY_AFTER)),
        (429, MAX_RETRY_AFTER + 1, False, None, None),  # longer than a wait may be
        (503, 10.0, True, 10.0, None),  # would end at the call's deadline
        (502, None, False, None, None),  # a gateway may have passed it on
        (502, None, True, None, Resend(None)),
        (504, 1.0, True, 5.0, Resend(1.0)),
        (504, 1.0, False, 5.0, None),
        (500, 1.0, True, None, None),
        (404, None, True, None, None),
    ],
)
def test_which_statuses_send_a_post_again(
    status: int, retry_after: float | None, idempotent: bool, remaining: float | None, step: Resend | None
) -> None:
    assert status_resend(status, retry_after, idempotent=idempotent, remaining=remaining) == step


def test_every_status_rule_names_its_source() -> None:
    assert set(STATUS_RESEND) == {429, 502, 503, 504}
    assert all(rule.source.startswith("RFC ") for rule in STATUS_RESEND.values())

"""The one rate-limit backoff (``ablate.core.backoff``) the scheduler and the judge share: how long it pauses,
which rate limits count as a new pause, and when it gives up."""

from __future__ import annotations

from ablate.core.backoff import MAX_PAUSES, Backoff, BackoffPolicy
from ablate.grade.judge import JudgeOptions
from ablate.run.schedule_types import RunOptions

POLICY = BackoffPolicy(first_s=2.0, max_s=10.0, max_named_s=100.0, max_pauses=3)


def test_without_a_named_wait_the_pause_doubles_up_to_its_cap() -> None:
    assert [POLICY.wait_s(n, None) for n in range(5)] == [2.0, 4.0, 8.0, 10.0, 10.0]


def test_a_named_wait_is_honoured_within_its_bounds() -> None:
    assert POLICY.wait_s(0, 50.0) == 50.0  # longer than the exponential cap: still waited for
    assert POLICY.wait_s(0, 500.0) == 100.0  # a reset hours away is waited for up to max_named_s
    assert POLICY.wait_s(3, 0.5) == 2.0  # a reset already (nearly) past by the local clock: the first pause
    assert POLICY.wait_s(0, -30.0) == 2.0


def test_rate_limits_of_calls_launched_before_the_pause_count_once() -> None:
    b = Backoff(POLICY)
    launched = b.epoch
    assert b.rate_limited(100.0, None, epoch=launched) == 2.0
    assert (b.pauses, b.paused_until, b.paused(101.0), b.paused(102.0)) == (1, 102.0, True, False)
    # a second call launched before that pause comes back rate-limited while it holds: already accounted for
    assert b.rate_limited(100.5, None, epoch=launched) is None
    assert (b.pauses, b.paused_until) == (1, 102.0)
    # ... and once the pause is over, an old call's rate limit is a new pause (the limit is still there)
    assert b.rate_limited(103.0, None, epoch=launched) == 4.0
    assert (b.pauses, b.paused_until) == (2, 107.0)


def test_a_success_of_the_current_epoch_ends_the_run_of_pauses_and_an_old_one_does_not() -> None:
    b = Backoff(POLICY)
    old = b.epoch
    b.rate_limited(0.0, None, epoch=old)
    b.succeeded(epoch=old)  # launched before the pause: says nothing about the limit now
    assert b.pauses == 1
    b.succeeded(epoch=b.epoch)
    assert b.pauses == 0
    assert b.rate_limited(10.0, None, epoch=b.epoch) == 2.0  # the next pause starts over from the first


def test_it_gives_up_after_more_than_max_pauses_in_a_row() -> None:
    b = Backoff(POLICY)
    now = 0.0
    for _ in range(POLICY.max_pauses):
        b.rate_limited(now, None, epoch=b.epoch)
        now = b.paused_until
        assert not b.exhausted
    b.rate_limited(now, None, epoch=b.epoch)
    assert b.exhausted


def test_the_scheduler_and_the_judge_share_one_default_policy() -> None:
    assert RunOptions().backoff == JudgeOptions(judge_models=("m",)).backoff == BackoffPolicy()
    assert BackoffPolicy().max_pauses == MAX_PAUSES

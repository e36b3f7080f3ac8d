"""Rate-limit backoff, the one implementation (the scheduler's pool of sessions, the judge's pool of calls).

A rate limit pauses every launch until the wait the server named, else for an exponential step. Calls
launched before the current pause (each records the pause *epoch* it saw) do not lengthen it or count again;
a call back without a rate limit ends the run of pauses; past ``max_pauses`` in a row the caller gives up."""

from __future__ import annotations

from dataclasses import dataclass

#: First pause after a rate limit that names no wait; doubles with every consecutive pause.
FIRST_PAUSE_S = 30.0
#: Longest pause without a named wait.
MAX_PAUSE_S = 900.0
#: Longest pause honoured for a named wait (a reset time hours away is waited for, up to this).
MAX_NAMED_WAIT_S = 6 * 3600.0
#: Consecutive pauses before the caller gives up.
MAX_PAUSES = 12


@dataclass(frozen=True)
class BackoffPolicy:
    """How long to pause after a rate limit, and when to give up."""

    first_s: float = FIRST_PAUSE_S
    """First pause without a named wait; doubles each time. Also the shortest named wait honoured (a reset
    time already past by the local clock is not a reason to hammer the endpoint)."""
    max_s: float = MAX_PAUSE_S
    """Longest pause without a named wait."""
    max_named_s: float = MAX_NAMED_WAIT_S
    """Longest pause honoured for a named wait."""
    max_pauses: int = MAX_PAUSES
    """Consecutive pauses before giving up."""

    def wait_s(self, pauses: int, named_s: float | None) -> float:
        """The pause after ``pauses`` consecutive ones: the named wait (bounded), else the exponential step."""
        if named_s is not None:
            return min(max(named_s, self.first_s), self.max_named_s)
        return min(self.first_s * 2.0**pauses, self.max_s)


class Backoff:
    """One pool's pauses (the pool's dispatching thread owns it); times are the caller's monotonic clock."""

    def __init__(self, policy: BackoffPolicy) -> None:
        self.policy = policy
        self.paused_until = 0.0
        """Launching waits until then."""
        self.pauses = 0
        """Consecutive pauses so far."""
        self.epoch = 0
        """Pauses ever taken: a launch records it, so its outcome is matched to the pause it saw."""

    def paused(self, now: float) -> bool:
        return now < self.paused_until

    @property
    def exhausted(self) -> bool:
        """More consecutive pauses than the policy allows: give up."""
        return self.pauses > self.policy.max_pauses

    def rate_limited(self, now: float, named_s: float | None, *, epoch: int) -> float | None:
        """A call launched at ``epoch`` came back rate-limited: pause, and return the wait (None when the call
        belongs to the pause in force, which already accounts for it)."""
        if epoch != self.epoch and now < self.paused_until:
            return None
        wait_s = self.policy.wait_s(self.pauses, named_s)
        self.pauses += 1
        self.epoch += 1
        self.paused_until = max(self.paused_until, now + wait_s)
        return wait_s

    def succeeded(self, *, epoch: int) -> None:
        """A call launched at ``epoch`` was not rate-limited: past the latest pause, the run of them ends."""
        if epoch == self.epoch:
            self.pauses = 0

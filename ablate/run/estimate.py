"""What a plan will cost, from what was measured whenever something was: this run's finished sessions, else a
probe's captured requests, else an assumed session shape (docs/ARCHITECTURE.md#cost-estimate)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from ablate.core.pricing import estimate_cost, price_for
from ablate.folder.result import ItemResult
from ablate.run.plan import ASSUMED_CALLS_PER_SESSION, ASSUMED_INPUT_TOKENS, ASSUMED_OUTPUT_TOKENS
from ablate.sim import iter_requests

#: Characters of a request's JSON per input token (measured: a ~88k-character request reports ~21k).
CHARS_PER_TOKEN = 4.2
#: New input per call after the first (tool results, the model's previous turn), not yet cached.
FRESH_TOKENS_PER_CALL = 1_500
#: Where a probe's captured requests are kept, relative to the folders searched.
PROBE_CAPTURES = ("requests.jsonl", "probe/requests.jsonl")

Basis = Literal["sessions", "probe", "assumed"]


@dataclass(frozen=True)
class CostEstimate:
    """Expected calls and spend of a number of sessions, and what the figure rests on."""

    sessions: int
    calls: int
    usd: float | None
    """None for a model without a known list price."""
    basis: Basis
    detail: str
    """The basis in words (what was measured, what was assumed)."""

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def probe_capture(folders: Iterable[Path | None], head: str) -> tuple[Path, list[int]] | None:
    """The first probe log under ``folders`` of the setup at ``head``, and its requests' sizes."""
    for folder in folders:
        if folder is None:
            continue
        for name in PROBE_CAPTURES:
            log = folder / name
            if not log.is_file():
                continue
            if sizes := [len(r.text) for r in iter_requests(log) if r.is_messages and head[:7] in r.text]:
                return log, sizes
    return None


def _session_calls(result: ItemResult) -> int | None:
    calls = result.session.total.api_calls if result.session is not None else 0
    return calls if calls > 0 else None


def _from_sessions(sessions: int, done: Sequence[ItemResult]) -> CostEstimate | None:
    costs = [r.cost_usd for r in done if r.cost_usd]
    if not costs:
        return None
    calls = [c for c in (_session_calls(r) for r in done) if c is not None]
    per_calls = statistics.fmean(calls) if calls else float(ASSUMED_CALLS_PER_SESSION)
    mean = statistics.fmean(costs)
    detail = f"measured: mean of the {len(costs)} sessions already run (${mean:.4f} each"
    detail += f", {per_calls:.1f} API calls each)" if calls else ")"
    return CostEstimate(sessions, round(per_calls * sessions), mean * sessions, "sessions", detail)


def _from_probe(
    sessions: int, model: str, calls_per: int, log: Path, sizes: Sequence[int]
) -> CostEstimate | None:
    prompt = round(statistics.median(sizes) / CHARS_PER_TOKEN)
    # the first call writes the prompt to the cache; every later one reads it back and adds fresh input
    first = estimate_cost(
        model, input_tokens=0, output_tokens=ASSUMED_OUTPUT_TOKENS, cache_write_5m_tokens=prompt
    )
    later = estimate_cost(
        model,
        input_tokens=FRESH_TOKENS_PER_CALL,
        output_tokens=ASSUMED_OUTPUT_TOKENS,
        cache_read_tokens=prompt,
    )
    if first is None or later is None:
        return None
    per_session = first + later * (calls_per - 1)
    detail = (
        f"measured request size from the probe ({log}: ~{prompt:,} input tokens per call, "
        f"median of {len(sizes)}); assumed {calls_per} API calls per session, prompt caching as Claude "
        f"Code uses it, {ASSUMED_OUTPUT_TOKENS} output tokens per call"
    )
    return CostEstimate(sessions, sessions * calls_per, per_session * sessions, "probe", detail)


def dearest(models: Sequence[str]) -> str:
    """The model of a run of several (``--models``) with the highest list price: its estimate is an upper end."""
    return max(models, key=lambda m: getattr(price_for(m), "output", 0.0))


def estimate_run(
    sessions: int,
    *,
    model: str,
    max_turns: int,
    done: Sequence[ItemResult] = (),
    probe: tuple[Path, list[int]] | None = None,
) -> CostEstimate:
    """The cost of ``sessions`` more sessions, from the finished sessions ``done`` when any has a cost, else
    from a probe capture (:func:`probe_capture`), else from an assumed session shape."""
    measured = _from_sessions(sessions, done)
    if measured is not None:
        return measured
    calls_per = min(max_turns, ASSUMED_CALLS_PER_SESSION)
    if probe is not None:
        from_probe = _from_probe(sessions, model, calls_per, *probe)
        if from_probe is not None:
            return from_probe
    per_call = estimate_cost(model, input_tokens=ASSUMED_INPUT_TOKENS, output_tokens=ASSUMED_OUTPUT_TOKENS)
    if per_call is None:
        return CostEstimate(
            sessions, sessions * calls_per, None, "assumed", f"no list price known for {model!r}"
        )
    detail = (
        f"assumed (nothing measured yet): {calls_per} API calls per session of "
        f"~{ASSUMED_INPUT_TOKENS // 1000}k input and {ASSUMED_OUTPUT_TOKENS} output tokens at list price, "
        "no prompt caching (an upper end; a probe of this setup, `ablate probe --work DIR`, measures it)"
    )
    return CostEstimate(sessions, sessions * calls_per, per_call * calls_per * sessions, "assumed", detail)

"""The one pricing table: list prices of Claude models, used to estimate a session's cost when the
transcript has no ``cost-state`` record and the CLI's own figure is unavailable.

Prices are US dollars per million tokens, as published on Anthropic's pricing page
(https://docs.anthropic.com/en/docs/about-claude/pricing, "Model pricing" table) for the first-party API:

- cache writes cost 1.25 x the input price for the 5-minute TTL and 2 x for the 1-hour TTL;
- cache reads (hits) cost 0.1 x the input price.

``claude-sonnet-4-6`` is priced from the CLI itself: Claude Code 2.1.332 reports ``costBasis: "list"``
and $3/M input, $15/M output (docs/CLAUDE-CODE.md#json-output). A model not in the table gets no estimate:
:func:`estimate_cost` returns ``None`` and the caller flags the cost as unknown rather than guessing."""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass

from ablate.core.errors import UsageError


@dataclass(frozen=True)
class Price:
    """List price of one model, in USD per million tokens."""

    input: float
    output: float

    @property
    def cache_write_5m(self) -> float:
        return self.input * 1.25

    @property
    def cache_write_1h(self) -> float:
        return self.input * 2.0

    @property
    def cache_read(self) -> float:
        return self.input * 0.1


#: Model id prefix (without the date suffix) -> list price. Longest prefix wins.
PRICES: dict[str, Price] = {
    # Claude 4.x family
    "claude-opus-4-5": Price(5.0, 25.0),
    "claude-opus-4-1": Price(15.0, 75.0),
    "claude-opus-4": Price(15.0, 75.0),
    "claude-sonnet-4-6": Price(3.0, 15.0),
    "claude-sonnet-4-5": Price(3.0, 15.0),
    "claude-sonnet-4": Price(3.0, 15.0),
    "claude-haiku-4-5": Price(1.0, 5.0),
    # Claude 3.x family (still seen in older transcripts)
    "claude-3-7-sonnet": Price(3.0, 15.0),
    "claude-3-5-sonnet": Price(3.0, 15.0),
    "claude-3-5-haiku": Price(0.8, 4.0),
    "claude-3-opus": Price(15.0, 75.0),
    "claude-3-haiku": Price(0.25, 1.25),
}

_SUFFIX = re.compile(r"(\[[^\]]*\]|-\d{8}|-v\d+(:\d+)?|@\d{8})$")


def normalize_model(model: str) -> str:
    """Strip provider prefixes and date/context suffixes (``us.anthropic.claude-x-20250514-v1:0``)."""
    m = model.strip().lower()
    if "claude" in m:
        m = m[m.index("claude") :]
    while True:
        stripped = _SUFFIX.sub("", m)
        if stripped == m:
            return m
        m = stripped


@functools.lru_cache(maxsize=256)
def price_for(model: str) -> Price | None:
    """The list price of ``model``, or None (remembered: the miner asks once per model of every session)."""
    m = normalize_model(model)
    best: str | None = None
    for prefix in PRICES:
        if (m == prefix or m.startswith(prefix + "-")) and (best is None or len(prefix) > len(best)):
            best = prefix
    return PRICES[best] if best is not None else None


def parse_models(text: str) -> list[str]:
    """``--models M1,M2,...``: each a Claude model id of the table above (a date or provider suffix allowed),
    each once; else a :class:`UsageError` naming the value and the nearest known ids. An alias (``sonnet``)
    follows the newest model, so it cannot be pinned, and a model without a price could not be costed."""
    models = [m.strip() for m in text.split(",") if m.strip()]
    if not models:
        raise UsageError(
            "--models is empty", hint="pass two or more model ids, e.g. claude-haiku-4-5,claude-sonnet-4-6"
        )
    for m in models:
        if price_for(m) is None or re.search(r"[\s/]", m):
            key = normalize_model(m)
            near = [p for p in PRICES if key in p][:3] or difflib.get_close_matches(
                key, PRICES, n=3, cutoff=0.5
            )
            raise UsageError(
                f"--models {text}: {m!r} is not a model ablate can pin (an alias such as sonnet follows the "
                "newest model; a model without a list price cannot be costed)",
                hint=f"nearest known: {', '.join(near or PRICES)}",
            )
        if models.count(m) > 1:
            raise UsageError(f"--models {text}: {m} is given twice", hint="name each model once")
    return models


def estimate_cost(
    model: str,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_write_5m_tokens: int = 0,
    cache_write_1h_tokens: int = 0,
    cache_read_tokens: int = 0,
) -> float | None:
    """Cost in USD of the given token counts at list price, or ``None`` for a model not in the table."""
    price = price_for(model)
    if price is None:
        return None
    per_token = 1e-6
    return (
        input_tokens * price.input
        + output_tokens * price.output
        + cache_write_5m_tokens * price.cache_write_5m
        + cache_write_1h_tokens * price.cache_write_1h
        + cache_read_tokens * price.cache_read
    ) * per_token

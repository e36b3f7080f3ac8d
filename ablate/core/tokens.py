"""The token estimate ablate uses where no tokenizer is at hand: 4 characters a token, rounded up (the
simulated endpoint's ``auto`` usage, a piece's ``tokens_source = "estimate"``, a cut's removed characters)."""

from __future__ import annotations

CHARS_PER_TOKEN = 4


def tokens_of_chars(chars: int) -> int:
    """Tokens for ``chars`` characters, rounded up (0 for none)."""
    return -(-max(chars, 0) // CHARS_PER_TOKEN)

"""ablate: measure whether a Claude Code setup helps, and which layer of it earns its keep."""

__version__ = "0.1.0"

#: The Claude Code version every run, probe and fixture is pinned to.
PINNED_CLAUDE_VERSION = "2.1.332"

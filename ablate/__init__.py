"""ablate: measure whether a Claude Code setup helps, and which layer of it earns its keep."""

__version__ = "0.1.0"
"""The one version: the package's (``pyproject.toml`` reads it from here) and ``ablate --version``'s."""

#: The distribution name on PyPI (``pip install ablate-claude``): ``ablate`` and ``ablate-cli`` belong to
#: unrelated projects. The import package and the command are ``ablate``.
DIST_NAME = "ablate-claude"

#: The Claude Code version every run, probe and fixture is pinned to.
PINNED_CLAUDE_VERSION = "2.1.332"

"""The one execution path's own policies, without sessions: the exit code and the writes summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ablate.core.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_PARTIAL, UsageError
from ablate.folder.writes_summary import denied_by_path, writes_lines
from ablate.run.execute import exit_code, preflight


@pytest.mark.parametrize(
    ("outcome", "changed", "code"),
    [
        ("finished", False, EXIT_OK),
        ("interrupted", False, EXIT_INTERRUPTED),
        ("failed-items", False, EXIT_PARTIAL),
        ("budget", False, EXIT_PARTIAL),
        ("rate-limited", False, EXIT_PARTIAL),
        ("finished", True, EXIT_FAILURE),
        ("interrupted", True, EXIT_FAILURE),
    ],
)
def test_exit_code_policy(outcome: str, changed: bool, code: int) -> None:
    assert exit_code(outcome, real_files_changed=changed) == code


def _writes(**by_folder: int) -> dict[str, object]:
    return {"outside_cell": {"home": {"by_folder": {k.replace("_", "."): v for k, v in by_folder.items()}}}}


def test_writes_are_summarised_once_per_path_for_the_whole_run() -> None:
    sessions = [_writes(**{"~/_gitconfig": 1, "~/_cache": 5}) for _ in range(11)] + [
        _writes(**{"~/_gitconfig": 2})
    ]
    assert writes_lines(sessions, 12) == [
        "12 of 12 sessions wrote ~/.gitconfig (13 files in all) — discarded",
        "11 of 12 sessions wrote ~/.cache (55 files in all) — discarded",
    ]
    assert writes_lines([], 12) == []
    assert writes_lines([_writes(**{"~/x": 1})], 3, noun="cells") == [
        "1 of 3 cells wrote ~/x (1 file in all) — discarded"
    ]


def test_refused_writes_are_summarised_once_per_path_for_the_whole_run() -> None:
    fenced: dict[str, Any] = {"fence": "bubblewrap", "denied": [{"path": "~/.gitconfig", "count": 2}]}
    sessions = [fenced, {"fence": "bubblewrap", "denied": []}, fenced, fenced]
    assert writes_lines(sessions, 12) == [
        "3 of 12 sessions were refused writing ~/.gitconfig — the fence held"
    ]
    assert denied_by_path(sessions) == {"~/.gitconfig": [0, 2, 3]}


def preflight_sealed(backend: str) -> bool:
    from ablate.isolate.detect import is_sealed
    from ablate.isolate.registry import choose_isolation

    return is_sealed(choose_isolation(backend))


def test_preflight_refuses_an_unknown_backend_and_a_split_endpoint(tmp_path: Path) -> None:
    config, repo = tmp_path / "config", tmp_path / "repo"
    config.mkdir()
    repo.mkdir()
    with pytest.raises(UsageError, match="--isolation chroot: unknown backend"):
        preflight(config, repo, isolation="chroot")
    (config / "settings.json").write_text('{"env": {"ANTHROPIC_BASE_URL": "https://proxy.invalid"}}')
    with pytest.raises(UsageError, match=r"env\.ANTHROPIC_BASE_URL"):
        preflight(config, repo, isolation="links", environ={})
    same = {"ANTHROPIC_BASE_URL": "https://proxy.invalid"}
    if preflight_sealed("links"):  # a sealed session would take the settings' URL over the relay's: refused
        with pytest.raises(UsageError, match="replaces the relay's URL"):
            preflight(config, repo, isolation="links", environ=same)
    checked = preflight(config, repo, isolation="links", environ=same, allow_network=True)
    assert checked.isolation.backend == "links"

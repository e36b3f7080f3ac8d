"""The pristine checkout is reused across runs while nothing it is made of changed, and never served stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablate.core.cache import cache_dir
from ablate.core.errors import UnsafeEnvironment
from ablate.isolate.checkout_cache import cached_checkout
from ablate.setup.examples import ExampleSetup, git
from ablate.setup.load import load_setup
from tests.git_fidelity_support import ordinary_repo, real_git_state


@pytest.fixture
def repo(tmp_path: Path) -> ExampleSetup:
    return ordinary_repo(tmp_path / "ex")


def _served(ex: ExampleSetup, root: Path) -> tuple[Path, bool]:
    return cached_checkout(load_setup(ex.config_dir, ex.repo, home=ex.home), root)


def _state(ex: ExampleSetup, checkout: Path) -> tuple[str, str]:
    # the cached checkout has no alternates (an overlay supplies the objects): read refs and config only
    refs = git(checkout, "for-each-ref", "--format=%(refname) %(objectname)")
    return refs, git(checkout, "config", "--local", "--list")


def test_reused_while_unchanged(repo: ExampleSetup, tmp_path: Path) -> None:
    first, reused = _served(repo, tmp_path / "cache")
    assert not reused and (first / "app.py").read_text() == (repo.repo / "app.py").read_text()
    again, reused = _served(repo, tmp_path / "cache")
    assert reused and again == first
    assert _state(repo, first) == (
        git(repo.repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        git(repo.repo, "config", "--local", "--list"),
    )


@pytest.mark.parametrize(
    "change",
    [
        "commit",
        "config",
        "tag",
        "stash",
        "hook",
        "branch",
    ],
)
def test_a_changed_repo_is_never_served_stale(repo: ExampleSetup, tmp_path: Path, change: str) -> None:
    old, _ = _served(repo, tmp_path / "cache")
    if change == "commit":
        (repo.repo / "app.py").write_text("print('v2')\n")
        git(repo.repo, "commit", "-qam", "v2")
    elif change == "config":
        git(repo.repo, "config", "user.name", "Renamed Dev")
    elif change == "tag":
        git(repo.repo, "tag", "v2.0")
    elif change == "stash":
        (repo.repo / "app.py").write_text("print('wip2')\n")
        git(repo.repo, "stash", "push", "-q", "-m", "second")
    elif change == "hook":
        hook = repo.repo / ".git" / "hooks" / "pre-commit"
        hook.write_text("#!/bin/sh\nexit 0\n")
    elif change == "branch":
        git(repo.repo, "checkout", "-q", "feature/login")
    new, reused = _served(repo, tmp_path / "cache")
    assert not reused and new != old
    assert _state(repo, new) == (
        git(repo.repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        git(repo.repo, "config", "--local", "--list"),
    )
    assert (new / "app.py").read_text() == git(repo.repo, "show", "HEAD:app.py")
    assert (new / ".git" / "HEAD").read_text() == (repo.repo / ".git" / "HEAD").read_text()
    if change == "hook":
        assert (new / ".git" / "hooks" / "pre-commit").read_text() == "#!/bin/sh\nexit 0\n"
    if change == "stash":
        assert (new / ".git" / "logs" / "refs" / "stash").read_bytes() == (
            repo.repo / ".git" / "logs" / "refs" / "stash"
        ).read_bytes()


def test_cache_dir_is_private_and_the_users_cache_dir_never_the_temporary_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, repo: ExampleSetup
) -> None:
    monkeypatch.setenv("ABLATE_CACHE_DIR", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    monkeypatch.delenv("ABLATE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "ablate"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # not absolute: ignored, as the XDG spec says
    assert cache_dir() == Path.home() / ".cache" / "ablate"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == Path.home() / ".cache" / "ablate"
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(UnsafeEnvironment, match="not private"):
        _served(repo, shared)


def test_the_served_checkout_prints_the_users_git_state_through_its_objects(
    repo: ExampleSetup, tmp_path: Path
) -> None:
    checkout, _ = _served(repo, tmp_path / "cache")
    alternates = checkout / ".git" / "objects" / "info" / "alternates"
    assert not alternates.exists()
    # what a session sees once its view supplies the objects (here: an alternates file on a copy)
    import shutil

    view = tmp_path / "view"
    shutil.copytree(checkout, view, symlinks=True)
    (view / ".git" / "objects" / "info" / "alternates").write_text(f"{repo.repo / '.git' / 'objects'}\n")
    assert real_git_state(repo, view) == real_git_state(repo)

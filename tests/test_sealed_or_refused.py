"""Sealed, or refused: the one decision (:func:`ablate.isolate.detect.require_sealed`) every command that
runs sessions takes before any probe or session, its messages, and what an ``--unsealed`` run carries to the
report and the gate. The backends' own checks are replaced the way the isolation tests replace them (a
bubblewrap that is missing or refuses), never the decision itself."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from ablate.core.errors import EXIT_USAGE, UsageError
from ablate.folder.layout import IsolationInfo
from ablate.isolate import detect, fence, registry
from ablate.isolate.backend import Support
from ablate.run.execute import preflight

SEALED = IsolationInfo(backend="namespace", mode="root", reason="locked by bubblewrap", locked=True)
UNLOCKED = IsolationInfo(backend="links", mode="unfenced", reason="NOT fenced: no bubblewrap", locked=False)
DISTROS = (
    "sudo apt-get install bubblewrap",
    "sudo dnf install bubblewrap",
    "sudo pacman -S bubblewrap",
    "sudo zypper install bubblewrap",
    "sudo apk add bubblewrap",
)


def _fence(monkeypatch: pytest.MonkeyPatch, support: fence.FenceSupport) -> None:
    monkeypatch.setattr(fence, "_try_fence", lambda: support)


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS seals nothing (its own test below)")
def test_a_sealed_backend_passes_and_unsealed_says_it_is_sealed_anyway() -> None:
    assert detect.require_sealed(SEALED, unsealed=False) == ""
    said = detect.require_sealed(SEALED, unsealed=True)  # a bad input that is said, not an error
    assert said == "--unsealed: the sessions are sealed anyway (namespace seals them here)"


def test_no_bubblewrap_is_refused_with_every_distributions_package_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    _fence(monkeypatch, fence.FenceSupport(False, "bubblewrap (bwrap) is not installed", None))
    with pytest.raises(UsageError) as refused:
        detect.require_sealed(UNLOCKED, unsealed=False)
    assert refused.value.exit_code == EXIT_USAGE
    assert refused.value.message == "sessions cannot be sealed here: bubblewrap (bwrap) is not installed"
    hint = refused.value.hint or ""
    assert all(command in hint for command in DISTROS), hint
    assert "or pass --unsealed" in hint and "--allow-unsealed" in hint
    said = detect.require_sealed(UNLOCKED, unsealed=True)
    assert said == (
        "UNSEALED (--unsealed): sessions share the host's network and sockets: "
        "bubblewrap (bwrap) is not installed"
    )


def test_a_bubblewrap_that_cannot_make_its_namespaces_is_refused_with_the_sysctl_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    why = "bubblewrap refused here: bwrap: No permissions to create new namespace"
    _fence(monkeypatch, fence.FenceSupport(False, why, "/usr/bin/bwrap"))
    with pytest.raises(UsageError) as refused:
        detect.require_sealed(UNLOCKED, unsealed=False)
    assert (
        refused.value.message
        == f"sessions cannot be sealed here: bubblewrap cannot make its namespaces here ({why})"
    )
    assert refused.value.hint == f"{detect.userns_refusal(why, overlay=False)}; {detect.UNSEALED_HINT}"
    # the fix names the sysctl that refuses them, as for the namespace backend's own check
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "max_user_namespaces").write_text("0\n")
    assert "sudo sysctl user.max_user_namespaces=15000" in detect.userns_refusal(why, tmp_path, overlay=False)


def test_a_backend_that_does_not_lock_where_bubblewrap_works_names_the_one_that_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    _fence(monkeypatch, fence.FenceSupport(True, "bubblewrap: locked mounts", "/usr/bin/bwrap"))
    unlocked = IsolationInfo(backend="namespace", reason="NOT locked: bubblewrap refused in the view: EPERM")
    with pytest.raises(UsageError, match="namespace does not lock its sessions here") as refused:
        detect.require_sealed(unlocked, unsealed=False)
    assert (refused.value.hint or "").startswith("pass --isolation links; or pass --unsealed")


def test_macos_seals_nothing_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    fenced = IsolationInfo(backend="links", mode="fenced", reason="sandbox-exec", locked=True)
    assert not detect.is_sealed(fenced)
    with pytest.raises(UsageError, match="macOS has no network namespaces"):
        detect.require_sealed(fenced, unsealed=False)
    assert detect.require_sealed(fenced, unsealed=True).startswith("UNSEALED (--unsealed)")


def test_preflight_refuses_before_anything_is_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    _fence(monkeypatch, fence.FenceSupport(False, "bubblewrap (bwrap) is not installed", None))
    # every backend works here, none locks its sessions (as with no bubblewrap)
    unlocked = Support(True, "NOT fenced: bubblewrap (bwrap) is not installed", "unfenced", False)
    as_here = {name: replace(kind, support=lambda: unlocked) for name, kind in registry.KINDS.items()}
    monkeypatch.setattr(registry, "KINDS", as_here)
    cache = tmp_path / "cache"
    monkeypatch.setenv("ABLATE_CACHE_DIR", str(cache))
    (tmp_path / "config").mkdir()
    with pytest.raises(UsageError, match="bubblewrap \\(bwrap\\) is not installed"):
        preflight(tmp_path / "config", tmp_path, isolation=None)
    assert not cache.exists()  # refused before ablate's cache dir (or anything else) was made
    checked = preflight(tmp_path / "config", tmp_path, isolation="links", unsealed=True)
    assert checked.isolation.backend == "links" and checked.seal_note.startswith("UNSEALED (--unsealed)")


def test_doctor_shows_sealing_as_a_check_with_its_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ablate.isolate.doctor import diagnose, render

    with monkeypatch.context() as here:
        here.setattr(sys, "platform", "linux")
        _fence(here, fence.FenceSupport(False, "bubblewrap (bwrap) is not installed", None))
        unlocked = Support(True, "NOT fenced: bubblewrap (bwrap) is not installed", "unfenced", False)
        here.setattr(
            registry, "KINDS", {n: replace(k, support=lambda: unlocked) for n, k in registry.KINDS.items()}
        )
        doc = diagnose(tmp_path, tmp_path)
    assert doc["sealing"]["ok"] is False and doc["ok"] is False
    assert doc["sealing"]["reason"] == "bubblewrap (bwrap) is not installed"
    assert all(command in doc["sealing"]["fix"] for command in DISTROS)
    (problem,) = [p for p in doc["problems"] if p["what"].startswith("sessions cannot be sealed")]
    assert problem["fix"] == doc["sealing"]["fix"]
    shown = render(doc)
    assert "sealing:      NO: bubblewrap (bwrap) is not installed" in shown
    assert "PROBLEM: sessions cannot be sealed here: bubblewrap (bwrap) is not installed" in shown
    # the machine as it is: where the fence works, sealing is a check that passes
    if fence.fence_support().ok and sys.platform != "darwin":
        assert diagnose(tmp_path, tmp_path)["sealing"] == {"ok": True, "reason": "", "fix": ""}

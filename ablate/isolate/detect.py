"""Whether the ``namespace`` backend works here, and why (tried for real once per process: a mount namespace
with overlayfs, as root or in a user namespace on Linux >= 5.11, then bubblewrap inside it); and whether
sessions can be sealed (docs/ARCHITECTURE.md#sealed), decided once by :func:`require_sealed`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ablate.core.errors import UsageError
from ablate.core.fsutil import atomic_write_json
from ablate.core.once import once
from ablate.folder.layout import IsolationInfo
from ablate.isolate import nsexec
from ablate.isolate.backend import Support
from ablate.isolate.fence import INSTALL_HINT, bwrap_path, fence_argv, fence_support

NSEXEC = Path(nsexec.__file__).resolve()
ROOT, USERNS = "root", "user-namespace"


def namespace_check() -> Support:
    """Whether the ``namespace`` backend works here and locks its sessions (tried once, for real)."""
    return _try_namespace()


@once
def _try_namespace() -> Support:
    if not sys.platform.startswith("linux"):
        return Support(False, f"mount namespaces are Linux-only (this is {sys.platform})")
    if not has_overlayfs():
        return Support(False, "the kernel has no overlayfs (/proc/filesystems)")
    mode = ROOT if os.geteuid() == 0 else USERNS
    bare = _try_view(locked=False)
    if bare:
        why = "mount namespace + overlayfs refused here" if mode == ROOT else userns_refusal(bare)
        return Support(False, f"{why} ({bare[:160]})" if mode == ROOT else why)
    who = "as root" if mode == ROOT else "as an ordinary user, in a user namespace of the user's own"
    view = f"every session in its own copy-on-write view at the real paths, {who}"
    fence = fence_support()
    if not fence.ok:
        return Support(True, f"{view}; NOT locked: {fence.reason}", mode, False)
    locked = _try_view(locked=True)
    if locked:
        return Support(True, f"{view}; NOT locked: bubblewrap refused in the view: {locked}", mode)
    return Support(True, f"{view}, locked by bubblewrap", mode, True)


def has_overlayfs() -> bool:
    try:
        return "overlay" in Path("/proc/filesystems").read_text(encoding="utf-8")
    except OSError:
        return False


def _try_view(*, locked: bool) -> str:
    """Mount an overlay as a session's view is and write through it: "" when that worked, else why not."""
    with tempfile.TemporaryDirectory(prefix="ablate-nscheck-") as tmp:
        base = Path(tmp)
        for name in ("lower", "upper", "work", "mnt"):
            (base / name).mkdir()
        (base / "lower" / "f").write_text("lower\n")
        spec = base / "spec.json"
        mount = {"target": str(base / "mnt"), "lower": [str(base / "lower")], "upper": str(base / "upper")}
        mount["work"] = str(base / "work")
        atomic_write_json(spec, {"mounts": [mount], "cwd": str(base / "mnt")})
        argv = ["sh", "-c", "echo x > f"]
        bwrap = bwrap_path()
        if locked and bwrap:
            argv = fence_argv(bwrap, argv, writable=[base / "mnt"], cwd=base / "mnt")
        try:
            proc = subprocess.run(
                [sys.executable, "-I", str(NSEXEC), str(spec), "--", *argv],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"the check failed to run: {exc}"
        if proc.returncode != 0:
            return proc.stderr.strip()[:200] or f"exit {proc.returncode}"
        if (base / "lower" / "f").read_text() != "lower\n" or not (base / "upper" / "f").is_file():
            return "the overlay check wrote through to its lower folder"
    return ""


def is_sealed(chosen: IsolationInfo) -> bool:
    """Whether the chosen backend's sessions are sealed (``sandbox-exec`` on macOS locks writes only)."""
    return chosen.locked and sys.platform != "darwin"


#: What ``--unsealed`` does, for the hint of a refusal.
UNSEALED_HINT = (
    "or pass --unsealed to run them anyway with the host's network and sockets (recorded in the manifest, "
    "said first in the report; `ablate gate` then passes the run only with --allow-unsealed)"
)


def seal_problem(chosen: IsolationInfo) -> tuple[str, str] | None:
    """Why the sessions of the backend ``chosen`` would not be sealed here, and the fix; None when they are."""
    if is_sealed(chosen):
        return None
    if sys.platform == "darwin":
        why = "macOS has no network namespaces: sandbox-exec keeps a session's writes in its cell, not its network"
        return why, "run ablate on Linux with bubblewrap"
    fence = fence_support()
    if fence.bwrap is None:
        return "bubblewrap (bwrap) is not installed", INSTALL_HINT
    if not fence.ok:
        return f"bubblewrap cannot make its namespaces here ({fence.reason})", userns_refusal(
            fence.reason, overlay=False
        )
    # bubblewrap works, but not inside this backend's view (namespace: refused in the mount namespace)
    return f"{chosen.backend} does not lock its sessions here ({chosen.reason})", "pass --isolation links"


def require_sealed(chosen: IsolationInfo, *, unsealed: bool) -> str:
    """The one decision before any probe or session: sessions of ``chosen`` are sealed, or the command is
    refused (``UsageError``: why and the fix) unless ``--unsealed``. Returns what to say: "", or for
    ``--unsealed`` whether they are sealed anyway (nothing that can be sealed runs unsealed) or why not."""
    problem = seal_problem(chosen)
    if problem is None:
        return (
            f"--unsealed: the sessions are sealed anyway ({chosen.backend} seals them here)"
            if unsealed
            else ""
        )
    why, fix = problem
    if unsealed:
        return f"UNSEALED (--unsealed): sessions share the host's network and sockets: {why}"
    raise UsageError(f"sessions cannot be sealed here: {why}", hint=f"{fix}; {UNSEALED_HINT}")


def userns_refusal(detail: str, proc_sys: Path = Path("/proc/sys"), *, overlay: bool = True) -> str:
    """Why an ordinary user's user namespace (for overlayfs, or bubblewrap's) was refused, and the fix."""

    def sysctl(name: str) -> str | None:
        try:
            return (proc_sys / name).read_text(encoding="ascii").strip()
        except OSError:
            return None

    if sysctl("kernel/apparmor_restrict_unprivileged_userns") == "1":
        return (
            "AppArmor refuses user namespaces to ordinary programs (kernel.apparmor_restrict_unprivileged_userns=1, "
            "Ubuntu >= 23.10); fix: `sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0`, or an AppArmor "
            "profile for the Python that runs ablate with the line `userns,`"
        )
    if sysctl("user/max_user_namespaces") == "0":
        return "user namespaces are off (user.max_user_namespaces=0); fix: `sudo sysctl user.max_user_namespaces=15000`"
    if sysctl("kernel/unprivileged_userns_clone") == "0":
        return (
            "unprivileged user namespaces are off (kernel.unprivileged_userns_clone=0); "
            "fix: `sudo sysctl kernel.unprivileged_userns_clone=1`"
        )
    if any(os.path.exists(p) for p in ("/.dockerenv", "/run/.containerenv")):
        return (
            "this container refuses user namespaces or mounts in them; fix: run it with "
            "`--security-opt seccomp=unconfined --security-opt apparmor=unconfined`, or run ablate as root in it"
        )
    release = os.uname().release
    if overlay and _kernel_below(release, (5, 11)):
        return f"overlayfs in a user namespace needs Linux >= 5.11 (this is {release}); fix: run as root"
    if not overlay:
        return (
            "let bubblewrap make user namespaces here (user.max_user_namespaces above 0, no AppArmor or seccomp "
            f"policy refusing them; bubblewrap said: {detail})"
        )
    return f"user namespace + overlayfs refused here: {detail}"


def _kernel_below(release: str, want: tuple[int, int]) -> bool:
    try:
        major, minor = (int(x) for x in release.split("-")[0].split(".")[:2])
    except ValueError:
        return False
    return (major, minor) < want

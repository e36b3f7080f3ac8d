"""The lock around a session (docs/ARCHITECTURE.md#write-fence, #sealed): bubblewrap, so the session cannot
undo its view and writes nothing but the paths given as writable; on macOS a ``sandbox-exec`` profile.

Chosen over ctypes in :mod:`ablate.isolate.nsexec`: bubblewrap also reaps the PID namespace's orphans as its
PID 1, dies with its parent and remounts every submount read-only, for a few milliseconds per session.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ablate.core.jsonl import json_strings
from ablate.core.once import once
from ablate.isolate.secrets import bwrap_hiding

#: How to get bubblewrap where it is missing, per distribution (the package is ``bubblewrap`` in each).
INSTALL_HINT = (
    "install bubblewrap: Debian/Ubuntu `sudo apt-get install bubblewrap`, Fedora `sudo dnf install bubblewrap`, "
    "Arch `sudo pacman -S bubblewrap`, openSUSE `sudo zypper install bubblewrap`, Alpine `sudo apk add bubblewrap`"
)


def bwrap_path() -> str | None:
    """The ``bwrap`` found on ``PATH`` (or in ``/usr/bin``), None when there is none."""
    return shutil.which("bwrap") or ("/usr/bin/bwrap" if os.access("/usr/bin/bwrap", os.X_OK) else None)


def fence_argv(
    bwrap: str,
    argv: Sequence[str],
    *,
    writable: Sequence[str | Path],
    cwd: str | Path,
    tmp: str | Path | None = None,
    visible: Sequence[str | Path] = (),
    network: bool = False,
    hidden: Sequence[Path] = (),
) -> list[str]:
    """``argv`` under ``bwrap``: read-only root, ``writable`` bound read-write (deeper after shallower), own
    user, PID, IPC, UTS and (unless ``network``) network namespaces, ``/proc/sys`` read-only, a private
    ``/dev``; ``tmp`` at ``/tmp`` with ``visible`` folders of the real ``/tmp`` bound back; ``hidden`` empty."""
    out = [
        bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
        *([] if network else ["--unshare-net"]),
        "--die-with-parent",
        "--cap-drop", "ALL",  # bubblewrap run by root keeps every capability unless told
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        # the kernel's settings read-only (as root a write would reach the host's)
        "--ro-bind", "/proc/sys", "/proc/sys",
    ]  # fmt: skip
    # the private /tmp first: a cell folder that lives under the real /tmp is bound back over it afterwards
    # (bubblewrap resolves sources outside the sandbox and makes the mount point inside the private /tmp)
    if tmp is not None:
        out += ["--bind", str(tmp), "/tmp"]
        for seen_path in dict.fromkeys(str(v) for v in visible):
            if seen_path.startswith("/tmp/") and os.path.isdir(seen_path):
                out += ["--ro-bind", seen_path, seen_path]
    seen: set[str] = set()
    for path in writable:
        p = str(path)
        if p in seen or not (os.path.isdir(p) or os.path.isfile(p)):
            continue
        seen.add(p)
        out += ["--bind", p, p]
    out += [*bwrap_hiding(hidden), "--chdir", str(cwd), "--", *argv]
    return out


@dataclass(frozen=True)
class FenceSupport:
    ok: bool
    reason: str
    bwrap: str | None
    sandbox_exec: str | None = None
    """macOS: the ``sandbox-exec`` that fences ``links`` sessions there instead of bubblewrap."""

    @property
    def name(self) -> str:
        """The fence, by the tool that makes it: ``bubblewrap`` or ``sandbox-exec``."""
        return "sandbox-exec" if self.sandbox_exec is not None else "bubblewrap"


def fence_support() -> FenceSupport:
    """Whether a bubblewrap fence works here, tried for real once per process."""
    return _try_fence()


@once
def _try_fence() -> FenceSupport:
    if sys.platform == "darwin":
        return _try_sandbox_exec()
    bwrap = bwrap_path()
    if bwrap is None:
        return FenceSupport(False, f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}", None)
    with tempfile.TemporaryDirectory(prefix="ablate-fence-") as tmp:
        base = Path(tmp)
        (base / "rw").mkdir()
        (base / "ro").mkdir()
        script = (
            "echo x > rw/f && ! (echo x > ro/f) 2>/dev/null && grep -Eq '^CapEff:\\s+0+$' /proc/self/status"
        )
        argv = fence_argv(bwrap, ["sh", "-c", script], writable=[base / "rw"], cwd=base)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return FenceSupport(False, f"bubblewrap failed to start: {exc}", bwrap)
        if proc.returncode != 0:
            why = (proc.stderr.strip() or f"exit {proc.returncode}")[:200]
            return FenceSupport(False, f"bubblewrap refused here: {why}", bwrap)
        if not (base / "rw" / "f").is_file() or (base / "ro" / "f").exists():
            return FenceSupport(False, "bubblewrap ran but did not fence the root read-only", bwrap)
    return FenceSupport(
        True, "bubblewrap: locked mounts, own PID namespace and /proc, no capabilities", bwrap
    )


def _refusal(shell: str, node: str) -> re.Pattern[str]:
    """A refused write in a tool's output: a shell's ``<path>: <shell>``, zsh's ``<shell lowered>: <path>``,
    and Claude Code's Write and Edit tools' ``<NODE>: <text>, open '<path>'``."""
    path = r"(/[^\s'\"`:]+)"
    return re.compile(
        rf"{path}['\"`]?: (?:{shell}|{node})\b|\b{shell.lower()}: {path}|\b{node}: [^,\n]*, \w+ '(/[^'\n]+)'"
    )


#: Per fence: bubblewrap's read-only binds fail with EROFS, a Seatbelt deny with EPERM.
_REFUSALS = {
    "bubblewrap": _refusal("Read-only file system", "EROFS"),
    "sandbox-exec": _refusal("Operation not permitted", "EPERM"),
}
#: Claude Code's Write and Edit tools write ``<path>.tmp.<pid>.<hex>`` and rename it over ``<path>``.
_ATOMIC = re.compile(r"\.tmp\.\d+\.[0-9a-f]+$")


def denied_writes(
    config_dir: Path, *, homes: Sequence[Path] = (), fence: str | None = None
) -> list[dict[str, object]]:
    """The writes the fence refused, as tools and hooks reported them in the transcripts under
    ``config_dir/projects`` (:data:`_REFUSALS`): each path and how often, most frequent first; a path under
    one of ``homes`` as ``~/...``, so every cell names the same file alike."""
    pattern = _REFUSALS[fence or ("sandbox-exec" if sys.platform == "darwin" else "bubblewrap")]
    counts: dict[str, int] = {}
    for transcript in sorted((config_dir / "projects").glob("*/*.jsonl")):
        try:
            lines = transcript.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            for text in _outputs(line):
                found = (_ATOMIC.sub("", next(g for g in m.groups() if g)) for m in pattern.finditer(text))
                for path in dict.fromkeys(found):
                    shown = _tilde(path, homes)
                    counts[shown] = counts.get(shown, 0) + 1
    return [{"path": p, "count": n} for p, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def _outputs(line: str) -> list[str]:
    """The text of each tool result of a ``user`` record (not its ``toolUseResult`` copy, nor the
    ``api-request-blob`` records that repeat the request) and of a hook's attachment."""
    try:
        record = json.loads(line)
    except ValueError:
        return []
    if not isinstance(record, dict):
        return []
    out: list[str] = []
    message = record.get("message") if record.get("type") == "user" else None
    content = message.get("content") if isinstance(message, dict) else None
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            out.append("\n".join(json_strings(block.get("content"))))
    attachment = record.get("attachment")
    if isinstance(attachment, dict) and str(attachment.get("type", "")).startswith("hook"):
        out.append("\n".join(json_strings(attachment)))
    return out


def _tilde(path: str, homes: Sequence[Path]) -> str:
    for home in homes:
        for spelling in dict.fromkeys((str(home).rstrip("/"), os.path.realpath(home))):
            if path == spelling or path.startswith(spelling + "/"):
                return "~" + path[len(spelling) :]
    return path


# ---------------------------------------------------------------------------------------------------------
# macOS: the same fence through sandbox-exec, checked against Anthropic's sandbox runtime's profile
# (docs/ARCHITECTURE.md#macos-profile: what is the same and what differs on purpose).

SANDBOX_EXEC = "/usr/bin/sandbox-exec"
_DEVICES = (
    '(literal "/dev/stdout") (literal "/dev/stderr") (literal "/dev/null") (literal "/dev/zero")\n'
    '  (literal "/dev/dtracehelper") (literal "/dev/autofs_nowait") (literal "/dev/ptmx")\n'
    '  (regex #"^/dev/tty") (regex #"^/dev/fd/")'
)


def sandbox_profile(writable: Sequence[Path], hidden: Sequence[Path] = ()) -> str:
    """A Seatbelt profile: all allowed but writes outside ``writable`` (and devices), and ``hidden``."""
    paths = "\n".join(f"  (subpath {_sb_string(os.path.realpath(p))})" for p in writable)
    profile = (
        f"(version 1)\n(allow default)\n(deny file-write*)\n(allow file-write*\n{paths}\n  {_DEVICES})\n"
    )
    denied = "".join(f"\n  (subpath {_sb_string(str(p))})" for p in hidden)
    return profile + (f"(deny file-read* file-write*{denied})\n" if hidden else "")


def _sb_string(text: str) -> str:
    """A profile string, quoted as sandbox-runtime quotes its paths (``JSON.stringify``)."""
    return json.dumps(text, ensure_ascii=False)


def _try_sandbox_exec() -> FenceSupport:
    if not os.access(SANDBOX_EXEC, os.X_OK):
        return FenceSupport(False, f"{SANDBOX_EXEC} is missing", None)
    with tempfile.TemporaryDirectory(prefix="ablate-fence-") as tmp:
        base = Path(tmp)
        (base / "rw").mkdir()
        script = f"echo x > {base}/rw/f && ! (echo x > {base}/f) 2>/dev/null"
        argv = [SANDBOX_EXEC, "-p", sandbox_profile([base / "rw"]), "sh", "-c", script]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return FenceSupport(False, f"sandbox-exec failed to start: {exc}", None)
        if proc.returncode != 0 or (base / "f").exists():
            return FenceSupport(False, f"sandbox-exec did not fence: {proc.stderr.strip()[:200]}", None)
    return FenceSupport(True, "sandbox-exec: writes only inside the cell", None, SANDBOX_EXEC)

"""Locating the Claude Code CLI and identifying it (version, binary hash)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import ConfigDict, model_validator

from ablate import PINNED_CLAUDE_VERSION
from ablate.core.cache import cache_dir, private_dir
from ablate.core.errors import AblateError, ClaudeNotFound, UsageError
from ablate.core.fsutil import atomic_write_json, sha256_file
from ablate.core.specs import Spec

_VERSION_RE = re.compile(r"(\d+\.\d+\.\d+)")


class ClaudeBinary(Spec):
    """A resolved ``claude`` executable: the CLI every session of a run used (the manifest's ``claude``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Path
    """Absolute path of the binary."""
    version: str
    """``claude --version`` (``2.1.332``)."""
    sha256: str
    """Hash of the binary: two builds with one version string are told apart."""
    pinned: bool = False
    """True when ``version`` is the version ablate is pinned to (set from it when not given)."""

    @model_validator(mode="before")
    @classmethod
    def _pinned(cls, data: Any) -> Any:
        if isinstance(data, dict) and "pinned" not in data:
            return {**data, "pinned": data.get("version") == PINNED_CLAUDE_VERSION}
        return data


#: Why ablate started the ``claude`` binary: a session of a run, the probe's session of a cell, its
#: untouched-setup (fidelity) and no-setup (baseline) sessions, ``--version`` to identify a new build.
StartPurpose = Literal["sessions", "probe", "fidelity", "baseline", "version"]
_STARTS: Counter[str] = Counter()
_STARTS_LOCK = threading.Lock()


def count_start(purpose: StartPurpose) -> None:
    """Count one start of the binary (every place that starts it calls this first)."""
    with _STARTS_LOCK:
        _STARTS[purpose] += 1


def take_starts() -> dict[str, int]:
    """The starts this process counted since the last take (the run that records them takes them)."""
    with _STARTS_LOCK:
        out = dict(_STARTS)
        _STARTS.clear()
    return out


#: The option that runs a binary other than the pinned version.
UNPINNED_OPTION = "--allow-unpinned-claude"


def require_pinned(claude: ClaudeBinary, *, allowed: bool) -> ClaudeBinary:
    """``claude`` when it is the pinned version or ``allowed`` (:data:`UNPINNED_OPTION`); else a
    :class:`UsageError` (exit 2): figures of another version are not comparable with pinned runs."""
    if claude.pinned or allowed:
        return claude
    raise UsageError(
        f"{claude.path}: Claude Code {claude.version}, not the pinned {PINNED_CLAUDE_VERSION}",
        hint=f"install the pinned version (npm install -g @anthropic-ai/claude-code@{PINNED_CLAUDE_VERSION}) "
        f"or pass {UNPINNED_OPTION} to run this one anyway (recorded as pinned: false)",
    )


def make_claude_bin() -> Path | None:
    """The CLI `make claude` installs into ablate's checkout (``.cache/claude``), when it is there."""
    modules = Path(__file__).resolve().parents[2] / ".cache" / "claude" / "node_modules" / "@anthropic-ai"
    found = sorted(modules.glob("claude-code-*/claude"))
    return found[0] if found else None


def claude_source(explicit: str | Path | None, environ: Mapping[str, str] | None = None) -> str | None:
    """Where :func:`find_claude` takes the CLI from (as ``ablate doctor`` names it); None when nowhere."""
    env = os.environ if environ is None else environ
    if explicit:
        return "$ABLATE_CLAUDE_BIN" if env.get("ABLATE_CLAUDE_BIN") == str(explicit) else "--claude-bin"
    if env.get("ABLATE_CLAUDE_BIN"):
        return "$ABLATE_CLAUDE_BIN"
    if shutil.which("claude", path=env.get("PATH")):
        return "PATH"
    return "make claude's .cache" if make_claude_bin() is not None else None


def find_claude(explicit: str | Path | None = None) -> ClaudeBinary:
    """Resolve the CLI: ``explicit``, ``$ABLATE_CLAUDE_BIN``, ``claude`` on PATH, :func:`make_claude_bin`."""
    candidate = explicit or os.environ.get("ABLATE_CLAUDE_BIN") or shutil.which("claude") or make_claude_bin()
    if not candidate:
        raise ClaudeNotFound(
            "`claude` not found (no --claude-bin, no $ABLATE_CLAUDE_BIN, not on PATH, no `make claude` in "
            "ablate's checkout)",
            hint="install Claude Code (npm install -g @anthropic-ai/claude-code@"
            f"{PINNED_CLAUDE_VERSION}, or `make claude` in ablate's checkout) or pass --claude-bin PATH",
        )
    path = Path(candidate).expanduser()
    if not path.exists():
        raise ClaudeNotFound(
            f"{path}: no such file", hint="pass --claude-bin with the path of the claude binary"
        )
    if not os.access(path, os.X_OK) or path.is_dir():
        raise ClaudeNotFound(
            f"{path}: not an executable file", hint="pass --claude-bin with the claude binary"
        )
    path = path.resolve()
    key = _stat_key(path)  # before hashing: a binary changed while it is hashed is hashed again next time
    known = _known_identity(path, key)
    if known is not None:
        return ClaudeBinary(path=path, version=known[0], sha256=known[1])
    count_start("version")
    try:
        out = subprocess.run(
            [str(path), "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/")},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ClaudeNotFound(f"{path}: could not run `--version` ({exc})") from exc
    match = _VERSION_RE.search(out.stdout)
    if out.returncode != 0 or not match:
        raise ClaudeNotFound(
            f"{path}: `--version` did not print a Claude Code version "
            f"(exit {out.returncode}: {(out.stdout + out.stderr).strip()[:200]!r})",
            hint="is this really the claude binary?",
        )
    found = ClaudeBinary(path=path, version=match.group(1), sha256=sha256_file(path))
    _remember_identity(found, key)
    return found


# ---------------------------------------------------------------------------------------------------------
# The binary's identity, remembered: hashing the 400 MB binary costs 0.4 s of CPU and about 2 s of wall time
# on every command. It is kept in this process and in ablate's cache folder, keyed by the file's stat (device,
# inode, size, modification and change times in ns), as git's index and make trust a file's stat: any write
# to the binary, or a new file in its place, changes the key and the binary is hashed again.

_IDENTITIES = "claude-identity.json"
_SEEN: dict[str, tuple[tuple[int, ...], str, str]] = {}


def _stat_key(path: Path) -> tuple[int, ...] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _known_identity(path: Path, key: tuple[int, ...] | None) -> tuple[str, str] | None:
    """(version, sha256) remembered for ``path`` while its stat is ``key``, else None."""
    if key is None:
        return None
    seen = _SEEN.get(str(path))
    if seen is None:
        try:
            folder = cache_dir()
            private_dir(folder)  # an identity someone else could have written is not trusted
            stored = orjson.loads((folder / _IDENTITIES).read_bytes()).get(str(path))
            seen = (tuple(stored["stat"]), str(stored["version"]), str(stored["sha256"]))
        except (OSError, ValueError, TypeError, KeyError, AttributeError, AblateError):
            return None
    return (seen[1], seen[2]) if seen[0] == key else None


def _remember_identity(binary: ClaudeBinary, key: tuple[int, ...] | None) -> None:
    """Keep ``binary``'s identity under ``key`` (taken before hashing); an unwritable cache is no error."""
    if key is None:
        return
    _SEEN[str(binary.path)] = (key, binary.version, binary.sha256)
    folder = cache_dir()
    try:
        private_dir(folder)
        try:
            table = orjson.loads((folder / _IDENTITIES).read_bytes())
            table = table if isinstance(table, dict) else {}
        except (OSError, ValueError):
            table = {}
        table[str(binary.path)] = {"stat": list(key), "version": binary.version, "sha256": binary.sha256}
        atomic_write_json(folder / _IDENTITIES, table)
    except (OSError, AblateError):
        return


#: Settings every ablate session gets on its command line (``--settings``, the CLI's flag-settings source,
#: above the user's files; docs/CLAUDE-CODE.md#background-memory): background memory consolidation
#: ("auto-dream", a forked agent that rewrites the auto-memory between sessions) is switched off, so no
#: session rewrites the memory a later session of another cell would read. Every cell and the probe's
#: untouched setup get the same line, so it is no difference between them.
SESSION_SETTINGS = '{"autoDreamEnabled":false}'


def claude_argv(
    binary: Path, *, prompt: str, model: str, session_id: str, max_turns: int | str, extra: Sequence[str] = ()
) -> list[str]:
    """The pinned command line of every ablate session (docs/ARCHITECTURE.md#sessions); stdin must be
    /dev/null. The prompt comes after ``--`` (it may start with a dash); ``--bare`` is never used (it replaces
    the whole system prompt and cuts the tool set: no baseline)."""
    return [
        str(binary), "-p",
        "--output-format", "json",
        "--model", model,
        "--permission-mode", "bypassPermissions",
        "--max-turns", str(max_turns),
        "--session-id", session_id,
        "--settings", SESSION_SETTINGS,
        *extra,
        "--", prompt,
    ]  # fmt: skip


def task_args(*, append_system_prompt: str = "") -> list[str]:
    """The options a task adds to each of its sessions in every cell alike (``--append-system-prompt``)."""
    return ["--append-system-prompt", append_system_prompt] if append_system_prompt else []


def find_transcript(config_dir: Path, session_id: str) -> Path | None:
    """The session's JSONL under ``config_dir/projects/*/`` (not from the slug: docs/CLAUDE-CODE.md#slug)."""
    matches = sorted((config_dir / "projects").glob(f"*/{session_id}.jsonl"))
    return matches[0] if matches else None

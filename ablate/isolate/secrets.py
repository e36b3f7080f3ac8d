"""The credential files a session never reads (docs/ARCHITECTURE.md#secrets): hidden in every fenced backend
unless ``--expose`` leaves one visible; ``--hide`` adds more. Entries are ``~/``-relative or absolute; only
those that exist are hidden."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ablate.core.errors import UsageError

#: Hidden by default: ssh and gpg keys, cloud, cluster and package-registry credentials, netrc, gh and git
#: credential stores, password stores and keyrings, and the CLI's own account state beside ``~/.claude``
#: (its ``/login`` key: a session reads its cell's copy, which never holds the key).
_DEFAULTS = (
    ".ssh .gnupg .aws .azure .config/gcloud .oci .kube/config .docker/config.json .netrc .git-credentials "
    ".config/git/credentials .config/gh/hosts.yml .config/hub .npmrc .yarnrc.yml .pypirc .config/pip/pip.conf "
    ".cargo/credentials .cargo/credentials.toml .gem/credentials .m2/settings-security.xml .claude.json "
    ".terraform.d/credentials.tfrc.json .vault-token .pgpass .my.cnf .password-store .local/share/keyrings"
)
DEFAULT_HIDDEN = tuple(f"~/{p}" for p in _DEFAULTS.split())


@dataclass(frozen=True)
class Secrets:
    """What a run hides (``~/``-relative or absolute), and the defaults ``--expose`` left visible."""

    hide: tuple[str, ...] = DEFAULT_HIDDEN
    exposed: tuple[str, ...] = ()

    def paths(self, home: Path) -> list[Path]:
        """The entries that exist, resolved (what a read reaches), outermost first, none inside another."""
        out: list[Path] = []
        found = {Path(os.path.realpath(_under(e, home))) for e in self.hide}
        for path in sorted(found, key=lambda p: (len(p.parts), str(p))):
            if path.exists() and not any(path.is_relative_to(q) for q in out):
                out.append(path)
        return out

    def shown(self, home: Path) -> list[str]:
        """:meth:`paths` as the record says them: ``~/...`` under the home."""
        return [_entry(p, home) for p in self.paths(home)]


def _under(entry: str, home: Path) -> Path:
    return home / entry[2:] if entry.startswith("~/") else Path(entry)


def _entry(path: Path, home: Path) -> str:
    """``path`` as an entry: ``~/rel`` under ``home``, else absolute."""
    real = Path(os.path.realpath(home))
    for base in dict.fromkeys((home, real)):
        if path.is_relative_to(base) and path != base:
            return "~/" + path.relative_to(base).as_posix()
    return str(path)


def secrets_policy(
    *,
    hide: Sequence[str] = (),
    expose: Sequence[str] = (),
    keep: Sequence[Path] = (),
    home: Path | None = None,
) -> Secrets:
    """The defaults plus ``--hide`` minus ``--expose``; refused: a path that holds or lies in one of ``keep``
    (the setup itself), and an ``--expose`` that names nothing hidden."""
    home = Path(home or Path.home())
    entries = list(DEFAULT_HIDDEN)
    for raw in hide:
        entry = _normal(raw, home, "--hide")
        path = _under(entry, home)
        for kept in keep:
            real = Path(os.path.realpath(kept))
            if kept.is_relative_to(path) or real.is_relative_to(path) or path.is_relative_to(real):
                raise UsageError(
                    f"--hide {raw}: {'inside' if path.is_relative_to(real) else 'holds'} {kept}, which the "
                    "sessions need (the setup's config dir or repository)",
                    hint="hide a credential file or folder; a cell set strips a layer",
                )
        entries.append(entry)
    exposed: list[str] = []
    for raw in expose:
        entry = _normal(raw, home, "--expose")
        gone = [e for e in entries if _under(e, home).is_relative_to(_under(entry, home))]
        if not gone:
            raise UsageError(
                f"--expose {raw}: nothing hidden there (hidden: {', '.join(entries)})",
                hint="name one of the hidden paths, or a folder holding some (a path inside a hidden folder "
                "is hidden with it: expose the folder)",
            )
        exposed += [e for e in gone if e in DEFAULT_HIDDEN]
        entries = [e for e in entries if e not in gone]
    return Secrets(tuple(dict.fromkeys(entries)), tuple(exposed))


def _normal(raw: str, home: Path, option: str) -> str:
    text = raw.strip()
    if not text or "\0" in text:
        raise UsageError(f"{option} {raw!r}: not a path", hint=f"{option} ~/.config/tool/token")
    path = Path(
        os.path.normpath(home / text.removeprefix("~").lstrip("/") if text[0] == "~" else home / text)
    )
    if path == Path("/") or path == home or Path(os.path.realpath(home)).is_relative_to(path):
        raise UsageError(
            f"{option} {raw}: the home or a folder holding it", hint="name a file or folder in it"
        )
    return _entry(path, home)


def bwrap_hiding(paths: Sequence[Path]) -> list[str]:
    """bubblewrap options that hide ``paths`` (after every other mount): an empty read-only tmpfs over a
    folder, an empty file read-only over a file (``/dev/null`` would not open: a user namespace's binds are
    ``nodev``)."""
    out: list[str] = []
    for path in paths:
        p = str(path)
        out += ["--tmpfs", p, "--remount-ro", p] if path.is_dir() else ["--ro-bind", str(empty_file()), p]
    return out


def empty_file() -> Path:
    """An empty regular file in ablate's cache dir (made again if anything changed it)."""
    from ablate.core.cache import ensure_cache_dir

    path = ensure_cache_dir() / "empty"
    if path.is_symlink() or not path.is_file() or path.stat().st_size:
        fresh = path.with_name(f"empty.{os.getpid()}.{threading.get_ident()}")
        fresh.unlink(missing_ok=True)
        fresh.touch(0o444)
        os.replace(fresh, path)  # atomic: a session starting meanwhile never finds it missing
    return path

"""``ablate doctor``: would a run here be isolated and authenticated, and if not, what to do. :func:`diagnose`
returns the checks as data, each problem with its fix; :func:`render` writes them for people."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ablate import PINNED_CLAUDE_VERSION
from ablate.core.claude import claude_source, find_claude
from ablate.core.errors import AblateError
from ablate.core.tempwork import make_work_dir, remove_tree
from ablate.isolate.auth import (
    FIX as AUTH_FIX,
    AuthMethod,
    auth_method,
    cell_logins,
    mismatch,
    moved_login_key,
)
from ablate.isolate.detect import UNSEALED_HINT, has_overlayfs, namespace_check, seal_problem
from ablate.isolate.fence import fence_support
from ablate.isolate.registry import KINDS, choice_json, choose_isolation

#: Below this much free space in the work folder a run of a big repository may not fit.
LOW_SPACE = 2 * 1024**3
DEFAULT_ENDPOINT = "https://api.anthropic.com"
NOT_FOUND_WHERE = "looked for --claude-bin, $ABLATE_CLAUDE_BIN, `claude` on PATH and make claude's .cache"


def _problem(what: str, fix: str) -> dict[str, str]:
    return {"what": what, "fix": fix}


def diagnose(
    config_dir: Path,
    work_dir: Path,
    *,
    claude_bin: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    repo: Path | None = None,
    cells: str = "layered",
    ablate_toml: Path | None = None,
) -> dict[str, Any]:
    """Every check, and ``ok``: a run here would be sealed and authenticated in every cell of ``cells``."""
    env = dict(os.environ if env is None else env)
    problems: list[dict[str, str]] = []
    notes: list[str] = []
    isolation, ns, fence = choose_isolation(None), namespace_check(), fence_support()
    why, fix = seal_problem(isolation) or ("", "")
    sealing: dict[str, Any] = {"ok": not why, "reason": why, "fix": f"{fix}; {UNSEALED_HINT}" if why else ""}
    if why:
        problems.append(_problem(f"sessions cannot be sealed here: {why}", sealing["fix"]))
    elif isolation.backend != next(iter(KINDS)):  # not the first choice: say why
        notes.append(f"runs use the {isolation.backend} backend ({isolation.mode}): {isolation.reason}")
    if not config_dir.is_dir():
        fix = "pass --config-dir with your Claude config dir (default: $CLAUDE_CONFIG_DIR, else ~/.claude), "
        fix += "or log in with `claude` once to create it"
        problems.append(_problem(f"{config_dir}: the Claude config dir does not exist", fix))
    claude = _claude(claude_bin, problems, env)
    auth = auth_method(env, config_dir)
    if auth.method in ("none", "keychain"):
        why = (
            "no login found"
            if auth.method == "none"
            else f"your login is the {auth.source}, which no cell reaches"
        )
        problems.append(_problem(f"authentication: {why}", AUTH_FIX))
    # a /login key reaches the cells as a run moves it: in ANTHROPIC_API_KEY (their account state drops it)
    session_env = moved_login_key(env, config_dir)[0]
    per_cell = cells_auth(
        config_dir, repo, cells, ablate_toml, session_env, auth_method(session_env, config_dir)
    )
    problems.extend(_problem(f"authentication: {why}", AUTH_FIX) for why in per_cell.pop("mismatches"))
    bad_input = per_cell.pop("problem")
    if bad_input is not None:
        problems.append(bad_input)
    elif not per_cell["checked"] and auth.method != "keychain":
        notes.append(f"cells' logins not checked: {per_cell['reason']}")
    free = _free(work_dir)
    if free is not None and free < LOW_SPACE:
        problems.append(_problem(f"{work_dir}: only {free // 1024**2} MiB free", "pick another --work-dir"))
    return {
        "ok": not problems,
        "platform": {"system": sys.platform, "release": platform.release(), "machine": platform.machine()},
        "isolation": choice_json(isolation),
        "sealing": sealing,
        "user_namespace": {"ok": ns.ok, "mode": ns.mode, "reason": ns.reason},
        "overlayfs": has_overlayfs(),
        "bubblewrap": {
            "path": fence.bwrap,
            "ok": fence.ok,
            "reason": fence.reason,
            "version": _bwrap_version(fence.bwrap),
        },
        "claude": claude,
        "auth": auth.to_json(),
        "auth_cells": per_cell,
        "endpoint": env.get("ANTHROPIC_BASE_URL") or DEFAULT_ENDPOINT,
        "work_dir": {"path": str(work_dir), "free_bytes": free},
        "problems": problems,
        "notes": notes,
    }


def cells_auth(
    config_dir: Path,
    repo: Path | None,
    cell_set: str,
    ablate_toml: Path | None,
    env: Mapping[str, str],
    mine: AuthMethod,
) -> dict[str, Any]:
    """How each cell of ``cell_set`` would authenticate, checked as a run checks it (:func:`cell_logins`)."""
    from ablate.setup.cells import load_cell_set
    from ablate.setup.layers import load_catalog
    from ablate.setup.load import load_setup

    out: dict[str, Any] = {
        "checked": False,
        "reason": "",
        "set": cell_set,
        "cells": {},
        "mismatches": [],
        "problem": None,
    }
    if mine.method == "keychain":
        out["reason"] = "a Keychain login reaches no cell (see the problem above)"
        return out
    # each input named by its own option: a bad --ablate-toml or --cells is a problem, a folder that is not a
    # repository only when --repo named it (the default, the current folder, leaves the cells unchecked)
    try:
        catalog = load_catalog(ablate_toml)
    except (AblateError, OSError) as exc:
        return _unchecked(out, "--ablate-toml", exc, "pass --ablate-toml with a valid ablate.toml, or none")
    try:
        resolved = load_cell_set(cell_set, catalog).cells
    except (AblateError, OSError) as exc:
        return _unchecked(out, "--cells", exc, "pass --cells with a shipped cell set name or a cells .toml")
    if not config_dir.is_dir():
        out["reason"] = "the config dir does not exist (see the problem above)"
        return out
    try:
        setup = load_setup(config_dir, (repo or Path.cwd()).resolve())
        tmp = make_work_dir("ablate-doctor-")
        try:
            logins = list(cell_logins(setup, catalog, resolved, tmp, base_env=env))
        finally:
            remove_tree(tmp)
    except (AblateError, OSError) as exc:
        if repo is not None:
            return _unchecked(out, "--repo", exc, "pass --repo with the git repository a run uses")
        why = getattr(exc, "message", exc)
        out["reason"] = f"{why} (run `ablate doctor` in the repository a run uses, or pass --repo)"
        return out
    out["checked"] = True
    out["cells"] = {c.cell_id: c.auth.to_json() for c in logins}
    out["mismatches"] = [
        why for c in logins if (why := mismatch(c.cell_id, mine, c.auth, config_dir, c.config_dir))
    ]
    return out


def _unchecked(out: dict[str, Any], option: str, exc: BaseException, fix: str) -> dict[str, Any]:
    """The cells' logins could not be checked because of the input ``option`` names: a problem."""
    message = getattr(exc, "message", None) or str(exc)
    out["reason"] = f"not checked: {option}: {message}"
    out["problem"] = _problem(f"{option}: {message}", getattr(exc, "hint", None) or fix)
    return out


def _claude(
    claude_bin: str | Path | None, problems: list[dict[str, str]], env: Mapping[str, str]
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "path": None,
        "version": None,
        "pinned": PINNED_CLAUDE_VERSION,
        "source": claude_source(claude_bin, env),
    }
    try:
        found = find_claude(claude_bin)
    except AblateError as exc:
        problems.append(_problem(f"claude CLI: {exc.message}", exc.hint or "install it (`make claude`)"))
        return out
    if not found.pinned:
        fix = f"npm install @anthropic-ai/claude-code@{PINNED_CLAUDE_VERSION}, or --claude-bin"
        problems.append(_problem(f"claude {found.version} is not the pinned {PINNED_CLAUDE_VERSION}", fix))
    return {**out, "path": str(found.path), "version": found.version}


def _bwrap_version(bwrap: str | None) -> str | None:
    if bwrap is None:
        return None
    try:
        out = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.strip().removeprefix("bubblewrap ").strip() or None


def _free(path: Path) -> int | None:
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


def render(doc: dict[str, Any]) -> str:
    """The report as lines a person reads."""
    iso, cl, bw, work = doc["isolation"], doc["claude"], doc["bubblewrap"], doc["work_dir"]
    free = "?" if work["free_bytes"] is None else f"{work['free_bytes'] / 1024**3:.1f} GiB"
    lines = [
        f"platform:     {doc['platform']['system']} {doc['platform']['release']}",
        f"isolation:    {iso['backend']} ({iso['mode']}): {iso['reason']}",
        "sealing:      " + ("yes" if doc["sealing"]["ok"] else f"NO: {doc['sealing']['reason']}"),
        f"userns:       {'yes' if doc['user_namespace']['ok'] else 'no'}; overlayfs: {'yes' if doc['overlayfs'] else 'no'}",
        f"bubblewrap:   {bw['path'] or 'missing'} {bw['version'] or ''}".rstrip(),
        f"claude:       {cl['path'] or 'not found'} {cl['version'] or ''} (pinned {cl['pinned']}; "
        f"{cl.get('source') or NOT_FOUND_WHERE})",
        f"auth:         {doc['auth']['method']} {doc['auth']['source']}".rstrip(),
        f"auth, cells:  {_cells_line(doc['auth_cells'])}",
        f"endpoint:     {doc['endpoint']}",
        f"work folder:  {work['path']} ({free} free)",
    ]
    lines += [f"note: {note}" for note in doc.get("notes", [])]
    lines += [f"PROBLEM: {p['what']}\n  fix: {p['fix']}" for p in doc["problems"]]
    ready = "ok: a run here would be isolated and authenticated"
    lines.append(ready if doc["ok"] else f"NOT ready: {len(doc['problems'])} problem(s) above")
    return "\n".join(lines)


def _cells_line(per_cell: dict[str, Any]) -> str:
    """``api-key: C0, C1, ...`` per method (the set's cells, grouped), or why they were not checked."""
    if not per_cell["checked"]:
        return str(per_cell["reason"])
    by_method: dict[str, list[str]] = {}
    for cell_id, auth in per_cell["cells"].items():
        by_method.setdefault(auth["method"], []).append(cell_id)
    return f"{per_cell['set']}: " + "; ".join(f"{m}: {', '.join(ids)}" for m, ids in by_method.items())

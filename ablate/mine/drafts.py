"""Draft task files from the user's own history (``ablate tasks suggest``; README.md's "Your own history"): the
most recent session of each group of sessions that used the same layers, its first prompt verbatim and
pitfalls from its tool errors and the user's corrections. Every draft carries ``draft = true``, which
:func:`ablate.setup.taskset.load_tasks` refuses until the user has reviewed it and deleted the line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.core.errors import OutputExists
from ablate.core.gitutil import run_git
from ablate.mine.history import SessionFacts
from ablate.mine.parse import main_thread_records
from ablate.mine.usage import Scope, usage_report
from ablate.setup.tomltext import dumps

CORRECTION = re.compile(
    r"^\s*(no\b|nope\b|don'?t\b|do not\b|stop\b|wrong\b|that'?s (not|wrong)\b|actually\b|instead\b|undo\b|"
    r"revert\b|why did you\b)",
    re.IGNORECASE,
)
_WORDS = re.compile(r"[A-Za-z0-9_./-]{3,}")


@dataclass
class Evidence:
    """What went wrong in one session: tool errors (tool, first line) and the user's corrections."""

    tool_errors: list[tuple[str, str]] = field(default_factory=list)
    corrections: list[str] = field(default_factory=list)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _first_line(content: Any) -> str:
    text = content if isinstance(content, str) else _text(content)
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def session_evidence(path: Path) -> Evidence:
    """Tool errors and corrections of a session transcript's main thread (unreadable: none)."""
    ev = Evidence()
    names: dict[str, str] = {}  # tool_use id -> tool name
    prompts = 0
    try:
        for rec in main_thread_records(path):
            content = (rec.get("message") or {}).get("content")
            blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
            if rec.get("type") == "assistant":
                names.update(
                    {str(b.get("id")): str(b.get("name", "?")) for b in blocks if b.get("type") == "tool_use"}
                )
                continue
            if rec.get("type") != "user" or rec.get("isMeta"):
                continue
            results = [b for b in blocks if b.get("type") == "tool_result"]
            for b in results:
                if b.get("is_error"):
                    tool = names.get(str(b.get("tool_use_id")), "?")
                    ev.tool_errors.append((tool, _first_line(b.get("content"))[:160]))
            text = "" if results else _text(content).strip()
            if not text or text.startswith(("<command-", "<local-command", "Caveat:")):
                continue
            prompts += 1
            if prompts > 1 and CORRECTION.match(text):
                ev.corrections.append(text.splitlines()[0][:200])
    except OSError:
        return Evidence()
    return ev


def _slug(text: str, limit: int = 40) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-") or "task"


def suggested_pitfalls(ev: Evidence) -> list[dict[str, str]]:
    """Pitfall drafts from the evidence: a regex (to be reviewed) and the evidence as the description."""
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    for tool, first in ev.tool_errors:
        pid = _slug(f"{tool}-error", 60)
        if pid in seen:
            continue
        seen.add(pid)
        words = _WORDS.findall(first)[:3]
        pattern = re.escape(" ".join(words)) if words else re.escape(tool)
        out.append(
            {
                "id": pid,
                "pattern": pattern,
                "scope": "text+tools",
                "description": f"DRAFT from a {tool} error in the session: {first!r}; write what the model "
                "says or does when it makes this mistake",
            }
        )
    for i, text in enumerate(ev.corrections, 1):
        words = _WORDS.findall(CORRECTION.sub("", text, count=1))[:3]
        out.append(
            {
                "id": f"correction-{i}",
                "pattern": re.escape(" ".join(words)) if words else "TODO",
                "scope": "text+tools",
                "description": f"DRAFT from the user's correction: {text!r}; write what the model says when it "
                "makes the mistake corrected",
            }
        )
    return out


def repo_head(repo: Path | None) -> str | None:
    """The commit ``repo`` has checked out (None: not a git repository)."""
    if repo is None:
        return None
    try:
        proc = run_git(repo, "rev-parse", "HEAD", check=False)
    except OSError:
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


@dataclass
class Draft:
    """One drafted task file."""

    id: str
    session_id: str | None
    started: str | None
    why: str
    text: str
    pitfalls: int


def representative(
    sessions: list[SessionFacts], rows: list[dict[str, Any]], count: int
) -> list[tuple[SessionFacts, str]]:
    """Up to ``count`` sessions: the most recent of each group of sessions that used the same layers, the
    biggest groups first (ties: the most recent)."""
    groups: dict[tuple[str, ...], list[tuple[SessionFacts, dict[str, Any]]]] = {}
    for f, row in zip(sessions, rows, strict=True):
        if f.first_prompt.strip() and not f.first_prompt.lstrip().startswith("<"):
            groups.setdefault(tuple(row["layers_used"]), []).append((f, row))
    latest = sorted(groups.items(), key=lambda kv: max(f.started or "" for f, _ in kv[1]), reverse=True)
    ranked = sorted(latest, key=lambda kv: -len(kv[1]))  # stable: equal groups stay latest first
    out: list[tuple[SessionFacts, str]] = []
    total = sum(len(v) for v in groups.values())
    for layers, members in ranked[:count]:
        f, _ = max(members, key=lambda m: m[0].started or "")
        used = ", ".join(layers) if layers else "no layer"
        out.append(
            (f, f"{len(members)} of {total} sessions used the same layers ({used}); this is the latest")
        )
    return out


def draft_tasks(scope: Scope, *, count: int = 5) -> list[Draft]:
    """Draft up to ``count`` task files from the history of ``scope`` (nothing written: see :func:`write_drafts`)."""
    result = usage_report(scope)
    sessions = result.facts
    head = repo_head(scope.repo)
    drafts: list[Draft] = []
    used_ids: set[str] = set()
    for f, why in representative(sessions, result.sessions, count):
        prompt = f.first_prompt.strip()
        tid = _slug(prompt.splitlines()[0])
        while tid in used_ids:
            tid = f"{tid[:60]}-{len(used_ids)}"
        used_ids.add(tid)
        pitfalls = suggested_pitfalls(session_evidence(f.path))
        header = "\n".join(
            [
                "DRAFT written by `ablate tasks suggest` for review: it is never run as it is.",
                "Check the prompt, turn the suggested pitfalls into regexes of what the model says when it slips",
                "(or delete them), then delete the `draft = true` line.",
                f"From session {f.session_id} of {(f.started or '?')[:19]} in {f.cwd or '?'}: {why}.",
                f"Repository HEAD when drafted: {head or 'unknown (not a git repository)'}; ablate runs tasks on",
                "--repo's HEAD, so check it out (or a commit where the task still makes sense) before running.",
            ]
        )
        data: dict[str, Any] = {
            "schema_version": 1,
            "draft": True,
            "id": tid,
            "prompt": prompt,
            "split": "dev",
            "description": f"drafted from session {f.session_id}",
            "pitfalls": pitfalls or None,
        }
        drafts.append(Draft(tid, f.session_id, f.started, why, dumps(data, header=header), len(pitfalls)))
    return drafts


def write_drafts(drafts: list[Draft], out: Path, *, force: bool = False) -> list[Path]:
    """Write each draft as ``out/<id>.toml``; an existing file is refused (:class:`OutputExists`) unless
    ``force`` (nothing is written when one is refused)."""
    paths = [out / f"{d.id}.toml" for d in drafts]
    clash = [p for p in paths if p.exists()]
    if clash and not force:
        raise OutputExists(
            f"{clash[0]}: exists ({len(clash)} of the drafts would replace a file)",
            hint="pass --out with another folder, or --force to replace them",
        )
    out.mkdir(parents=True, exist_ok=True)
    for d, p in zip(drafts, paths, strict=True):
        p.write_text(d.text, encoding="utf-8")
    return paths

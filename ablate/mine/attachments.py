"""What a transcript says reached the model: the attachment and hook records of the pinned CLI (2.1.332).

The one reader of these record shapes, used by the miner (``SessionResult.instruction_files``,
``skills_listed``, ``hooks_fired``) and by the probe (which also needs the loaded files' content and the hook
commands): a change in the CLI's records is fixed in one place."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

#: Hook records of the pinned CLI (2.1.332), collected from real sessions against ablate.sim (when each is
#: written: README.md's table under "Proving isolation"; tests/test_probe.py and tests/test_real_setup.py
#: reproduce them). ``hook_success`` and ``hook_non_blocking_error`` attachments name the ``command``;
#: ``hook_additional_context`` names none (its ``hook_success`` precedes it); ``stop_hook_summary``'s
#: ``hookInfos[].command`` names every Stop hook that ran, silent ones too; an ``informational`` system record
#: says "<Event> operation blocked by hook:\n[<command>]: ...". A hook counts as *kept* when any of these names
#: its command (a failed attempt is still an attempt); where none can appear the probe says ``~``.
HOOK_ATTACHMENT_PREFIX = "hook_"
_BLOCKED_BY_HOOK = re.compile(r"operation blocked by hook:\n\[(.+?)\]: ", re.S)


def hook_commands_in(rec: dict[str, Any]) -> list[str]:
    """The hook commands one transcript record shows as run (see the table above)."""
    att = rec.get("attachment")
    if isinstance(att, dict):
        kind = str(att.get("type", ""))
        cmd = att.get("command")
        if kind.startswith(HOOK_ATTACHMENT_PREFIX) and isinstance(cmd, str):
            return [cmd]
        return []
    if rec.get("type") == "system":
        if rec.get("subtype") == "stop_hook_summary":
            infos = rec.get("hookInfos")
            return (
                [
                    str(i["command"])
                    for i in infos
                    if isinstance(i, dict) and isinstance(i.get("command"), str)
                ]
                if isinstance(infos, list)
                else []
            )
        content = rec.get("content")
        if isinstance(content, str):
            return _BLOCKED_BY_HOOK.findall(content)
    return []


def instruction_files_in(att: dict[str, Any]) -> list[dict[str, str]]:
    """``{path, type, content}`` of every instruction file an ``instructions`` / ``nested_memory``
    attachment says was loaded."""
    kind = att.get("type")
    if kind == "instructions":
        files = att.get("files")
        return [
            {"path": f["path"], "type": str(f.get("type") or "?"), "content": str(f.get("content") or "")}
            for f in (files if isinstance(files, list) else [])
            if isinstance(f, dict) and isinstance(f.get("path"), str)
        ]
    if kind == "nested_memory":
        path = att.get("path") or att.get("filePath")
        if isinstance(path, str):
            return [{"path": path, "type": "Nested", "content": str(att.get("content") or "")}]
    return []


# A literal first character lets the regex engine jump between candidate lines (``^`` with re.M tries
# every position): the content is searched with a newline put in front.
_LISTING_LINE = re.compile(r"\n- ([^:\n\r]+):")


@functools.lru_cache(maxsize=64)
def _listing_lines(content: str) -> tuple[str, ...]:
    """The ``- name:`` lines of a skill listing (remembered: sessions of one setup repeat one listing)."""
    return tuple(_LISTING_LINE.findall("\n" + content))


def listed_names_in(att: dict[str, Any]) -> list[str]:
    """Skills (``skill_listing``: ``names`` and the ``- name:`` lines of its content) and agent types
    (``agent_listing_delta``) an attachment offered the model."""
    kind = att.get("type")
    if kind == "skill_listing":
        names = [str(n) for n in att.get("names") or [] if isinstance(n, str)]
        names.extend(_listing_lines(str(att.get("content", ""))))
        return names
    if kind == "agent_listing_delta":
        return [str(n) for n in att.get("addedTypes") or [] if isinstance(n, str)]
    return []


@dataclass
class LoadEvidence:
    """Everything one transcript file says about what was loaded and run at start."""

    instruction_files: list[dict[str, str]] = field(default_factory=list)
    listed: set[str] = field(default_factory=set)
    hook_commands: list[str] = field(default_factory=list)


def _records(path: Path) -> Iterator[dict[str, Any]]:
    with path.open("rb") as fh:
        for line in fh:
            if b'"attachment"' not in line and b'"system"' not in line:
                continue  # neither an attachment nor a system record: nothing here
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(rec, dict):
                yield rec


def read_load_evidence(path: Path) -> LoadEvidence:
    """Read the attachment and hook records of one transcript file (malformed lines are skipped)."""
    out = LoadEvidence()
    for rec in _records(path):
        out.hook_commands.extend(hook_commands_in(rec))
        att = rec.get("attachment")
        if isinstance(att, dict):
            out.instruction_files.extend(instruction_files_in(att))
            out.listed.update(listed_names_in(att))
    return out

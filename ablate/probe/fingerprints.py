"""Fingerprints of a user's real layer content for the probe (never canaries: the user's files are read only):
needles chosen by how each layer shows up; one also seen without a setup or in another layer is generic and
dropped, never guessed. Also the shadow-fidelity comparison of the control's first request with the untouched
setup's."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, assert_never

from ablate.core.jsonl import map_strings
from ablate.isolate.forwarder import scrub_billing
from ablate.setup.kinds import layer_kind
from ablate.setup.layers import Catalog, LayerFiles, hook_entries, json_keys
from ablate.setup.load import listed, style_name

Kind = Literal["text", "names", "hooks", "files", "unprobed", "unobservable", "absent"]

MIN_LINE = 16
MAX_NEEDLES = 6
#: Hook events whose commands run (and can leave a record) in a one-prompt session that calls no tool.
OBSERVABLE_HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "Stop")

_FRONTMATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*\n", re.S)


@dataclass
class LayerPrint:
    """How one layer's presence is recognised."""

    layer: str
    kind: Kind
    needles: list[str] = field(default_factory=list)
    reason: str = ""
    """Why the layer is unobservable, unprobed or too generic, or what the needles are."""
    expect: list[str] | None = None
    """The needles a kept layer must show (None: any needle). Hooks: only the commands that can leave a
    record in a one-prompt session; every configured command still counts as a leak where stripped."""

    def expected(self) -> list[str]:
        return list(self.needles) if self.expect is None else [n for n in self.expect if n in self.needles]

    @property
    def usable(self) -> bool:
        return bool(self.needles) and self.kind in ("text", "names", "hooks")


def frontmatter(text: str) -> dict[str, str]:
    """The simple ``key: value`` pairs of a Markdown front-matter block."""
    m = _FRONTMATTER.match(text)
    out: dict[str, str] = {}
    if not m:
        return out
    for line in m.group(1).splitlines():
        if ":" in line and not line.startswith((" ", "\t")):
            k, v = line.split(":", 1)
            out[k.strip()] = v.strip().strip("'\"")
    return out


def distinctive_lines(text: str) -> list[str]:
    """Candidate lines: long enough, not an import, not front matter, not only punctuation."""
    body = _FRONTMATTER.sub("", text, count=1)
    out = []
    for raw in body.splitlines():
        line = raw.strip()
        if len(line) < MIN_LINE or line.startswith(("@", "```")) or not re.search(r"[A-Za-z]{4}", line):
            continue
        if line not in out:
            out.append(line)
    return out


def _names(lf: LayerFiles) -> list[str]:
    """Skill/command/agent names as they appear in the listings (``- name:``)."""
    names: list[str] = []
    for rel in lf.files:
        p = Path(rel)
        if p.suffix != ".md":
            continue
        parts = p.parts
        try:
            text = (lf.base / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        meta = frontmatter(text)
        if not listed(lf, rel):
            continue  # on disk, never listed (skills/_internal/<n>/SKILL.md, a plugin not installed and enabled)
        if p.name == "SKILL.md" and len(parts) >= 2:
            name = meta.get("name") or parts[-2]
        elif "commands" in parts or "agents" in parts:
            name = meta.get("name") or p.stem
        else:
            continue
        if name and name not in names:
            names.append(name)
    return names


@dataclass(frozen=True)
class HookSpec:
    """One configured hook command."""

    event: str
    command: str
    is_async: bool = False

    @property
    def shows(self) -> bool:
        """Whether it leaves a record in a one-prompt, no-tool session when it prints or fails (SessionStart,
        UserPromptSubmit and Stop hooks, sync: :mod:`ablate.mine.attachments` lists the records)."""
        return self.event in OBSERVABLE_HOOK_EVENTS and not self.is_async


def _key_objects(lf: LayerFiles) -> list[dict[str, Any]]:
    """The value of each of the layer's JSON keys that holds an object (an unreadable file gives none)."""
    out = []
    for kp in lf.keys:
        value = (json_keys(kp.path) or {}).get(kp.key)
        out.extend([value] if isinstance(value, dict) else [])
    return out


def hook_specs(lf: LayerFiles) -> list[HookSpec]:
    """Every hook command found in the layer's JSON keys, in order."""
    specs = (
        HookSpec(event, cmd, bool(h.get("async")))
        for hooks in _key_objects(lf)
        for event, *_, h in hook_entries(hooks)
        if isinstance(cmd := h.get("command"), str) and cmd.strip()
    )
    return list(dict.fromkeys(specs))


def _hook_print(layer_id: str, lf: LayerFiles) -> LayerPrint:
    specs = hook_specs(lf)
    commands = list(dict.fromkeys(sp.command for sp in specs))
    expect = [c for c in commands if any(sp.command == c and sp.shows for sp in specs)]
    hidden = sorted(
        {f"{sp.event}{' (async)' if sp.is_async else ''}" for sp in specs if sp.command not in expect}
    )
    if not commands:
        return LayerPrint(layer_id, "unobservable", reason="no hook commands found")
    reason = f"{len(commands)} hook command(s)"
    if hidden:
        reason += (
            f"; {', '.join(hidden)} hooks cannot show in a one-prompt probe session "
            "(async, tool and end-of-session hooks leave no record)"
        )
    return LayerPrint(layer_id, "hooks", commands, reason, expect=expect)


def layer_prints(
    catalog: Catalog,
    layers: dict[str, LayerFiles],
    *,
    with_mcp: bool = False,
    style: tuple[str | None, str] = (None, ""),
) -> dict[str, LayerPrint]:
    """Fingerprints for every layer of a setup, before generic needles are dropped."""
    prints: dict[str, LayerPrint] = {}
    for layer in catalog:
        lf, lid = layers[layer.id], layer.id
        if not lf.present:
            prints[lid] = LayerPrint(lid, "absent", reason="not in this setup")
            continue
        probe_by = layer_kind(layer.shows).probe
        match probe_by:
            case "files":
                why = "repo docs are never auto-loaded: checked in each cell's checkout"
                prints[lid] = LayerPrint(lid, "files", reason=why)
            case "mcp" if with_mcp:
                prints[lid] = LayerPrint(
                    lid,
                    "names",
                    [f"mcp__{k}" for k in dict.fromkeys(k for servers in _key_objects(lf) for k in servers)],
                    "MCP tool names",
                )
            case "mcp":
                why = "MCP servers are real processes; not started (use --with-mcp)"
                prints[lid] = LayerPrint(lid, "unprobed", reason=why)
            case "hook":
                prints[lid] = _hook_print(lid, lf)
            case "names":
                names = _names(lf)
                why = "no named skills, commands or agents found"
                prints[lid] = (
                    LayerPrint(lid, "names", names, "listed names")
                    if names
                    else LayerPrint(lid, "unobservable", reason=why)
                )
            case "style":
                prints[lid] = _style_print(lid, lf, style)
            case "text":
                prints[lid] = LayerPrint(lid, "text", _text_needles(lf), "distinctive lines")
            case _:
                assert_never(probe_by)
    _drop_shared(prints)
    return prints


def _style_print(layer_id: str, lf: LayerFiles, style: tuple[str | None, str]) -> LayerPrint:
    """An output style reaches the model only when selected: the CLI matches ``outputStyle`` against each
    style's front-matter ``name`` (else its file stem) and puts ``# Output Style: <name>`` plus the body in
    the first user message (a system-reminder; transcript ``attachment:output_style_instructions``)."""
    selected, where = style
    styles = {style_name(lf.base / rel): rel for rel in lf.files if rel.endswith(".md")}
    if selected is None:
        return LayerPrint(
            layer_id,
            "unobservable",
            reason="no outputStyle is selected in any settings file: the CLI applies none of these styles",
        )
    rel = styles.get(selected)
    if rel is None:
        return LayerPrint(
            layer_id,
            "unobservable",
            reason=(
                f"outputStyle {selected!r} ({where}) matches no style here (the CLI selects by front-matter "
                f"name: {', '.join(sorted(styles)) or 'none'}): none of these styles reaches the model"
            ),
        )
    try:
        needles = distinctive_lines((lf.base / rel).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        needles = []
    return LayerPrint(layer_id, "text", needles, f"lines of the selected style {selected!r}")


def _drop_shared(prints: dict[str, LayerPrint]) -> None:
    """A needle found in two layers identifies neither."""
    owners: dict[str, set[str]] = {}
    for p in prints.values():
        for n in p.needles:
            owners.setdefault(n, set()).add(p.layer)
    for p in prints.values():
        p.needles = [n for n in p.needles if len(owners[n]) == 1]


def needle_in(kind: Kind, needle: str, text: str) -> bool:
    """Whether ``needle`` of a layer of ``kind`` shows in ``text``."""
    if kind == "names":
        if needle.startswith("mcp__"):
            return needle + "__" in text
        return f"- {needle}:" in text or f'"{needle}"' in text
    return needle in text


def drop_generic(prints: dict[str, LayerPrint], baseline_text: str) -> None:
    """Drop needles that show in a request made with no setup; keep at most MAX_NEEDLES per layer."""
    for p in prints.values():
        if p.kind not in ("text", "names", "hooks"):
            continue
        had = len(p.needles)
        p.needles = [n for n in p.needles if not needle_in(p.kind, n, baseline_text)]
        if p.kind != "hooks":  # every hook command is kept: each one is a possible leak
            p.needles = p.needles[:MAX_NEEDLES]
        if not p.needles:
            p.reason = (
                "too generic to fingerprint: every candidate also appears without any setup"
                if had
                else "too generic to fingerprint: no distinctive content"
            )
            p.kind = "unobservable"


def _text_needles(lf: LayerFiles) -> list[str]:
    """Distinctive lines of an instruction or memory layer's files (an unreadable file gives none)."""
    needles: list[str] = []
    for rel in lf.files:
        try:
            needles.extend(distinctive_lines((lf.base / rel).read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    return needles


# ---------------------------------------------------------------------------------------------------------
# Shadow fidelity: the control's request against the untouched setup's

_BRANCH = re.compile(r"(Current branch: )[^\n]*")
_HOOK_BLOCK = re.compile(r"^<system-reminder>\n[A-Za-z]+(?::[a-z]+)? hook ")
#: What an exact comparison ignores: nothing about git, the layers or the paths.
EXACT_IGNORED = ("session id", "billing header", "order of concurrent hook outputs")


def hook_blocks_sorted(messages: Any) -> Any:
    """``messages`` with each run of consecutive hook-output blocks sorted: the hooks of one event run in
    parallel and their output reaches the request in completion order, which differs between any two
    sessions of the same setup (measured: 12 Python hooks, C0 and the untouched setup in another order)."""
    if not isinstance(messages, list):
        return messages
    out = []
    for msg in messages:
        content = msg.get("content") if isinstance(msg, dict) else None
        if not isinstance(content, list):
            out.append(msg)
            continue
        blocks: list[Any] = []
        run: list[Any] = []
        for block in [*content, None]:
            text = block.get("text") if isinstance(block, dict) else None
            if isinstance(text, str) and _HOOK_BLOCK.match(text):
                run.append(block)
                continue
            blocks.extend(sorted(run, key=lambda b: json.dumps(b, sort_keys=True)))
            run = []
            if block is not None:
                blocks.append(block)
        out.append({**msg, "content": blocks})
    return out


def normalise_request(
    body: dict[str, Any], replacements: dict[str, str], *, keep_branch: bool = False
) -> str:
    """The request as text with ``replacements`` (paths) applied, the billing header and the order of
    concurrent hook outputs made comparable, and (unless ``keep_branch``) the git branch line."""
    picked: Any = {
        k: hook_blocks_sorted(body.get(k)) if k == "messages" else body.get(k)
        for k in ("system", "messages", "tools", "model", "max_tokens")
    }
    text = json.dumps(_scrubbed(picked, keep_branch=keep_branch), sort_keys=True)
    for src in sorted(replacements, key=len, reverse=True):
        text = text.replace(src, replacements[src])
    return text


def _scrubbed(value: Any, *, keep_branch: bool) -> Any:
    """``value`` with the billing header (and unless ``keep_branch`` the branch line) blanked in every
    string, line by line. Done on the strings, not on the JSON text: there a newline is the two characters
    ``\\n`` and a line pattern would run to the end of the document (it did: the system prompt and the tool
    list after the billing header went uncompared until this was found)."""

    def scrub(text: str) -> str:
        return scrub_billing(text) if keep_branch else _BRANCH.sub(r"\1<branch>", scrub_billing(text))

    return map_strings(value, scrub)


#: The differing middle of two requests that is diffed character by character; a longer one is shown whole
#: (difflib is quadratic: two 89 KB requests took minutes).
DIFF_WINDOW = 4000
#: Characters of each side shown per difference.
EXCERPT = 300


def _shared_start(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def diff_summary(a: str, b: str, limit: int = 3) -> list[str]:
    """The first ``limit`` differences of two normalised requests; only the differing middle is diffed."""
    if a == b:
        return []
    start = _shared_start(a, b)
    tail = _shared_start(a[start:][::-1], b[start:][::-1])
    a_end, b_end = len(a) - tail, len(b) - tail
    if (a_end - start) + (b_end - start) > DIFF_WINDOW:
        spans = [("replace", start, a_end, start, b_end)]
    else:
        matcher = difflib.SequenceMatcher(None, a[start:a_end], b[start:b_end], autojunk=False)
        spans = [
            (tag, start + i1, start + i2, start + j1, start + j2)
            for tag, i1, i2, j1, j2 in matcher.get_opcodes()
            if tag != "equal"
        ] or [("replace", start, a_end, start, b_end)]
    return [
        f"{tag}: C0 {a[max(0, i1 - 40) : i2 + 40][:EXCERPT]!r} vs untouched {b[max(0, j1 - 40) : j2 + 40][:EXCERPT]!r}"
        for tag, i1, i2, j1, j2 in spans[:limit]
    ]


def exact_fidelity(
    control: str, control_requests: Sequence[dict[str, Any]], untouched_requests: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """The ``namespace`` backend's check: the control and the untouched setup run at the same paths, so their
    first requests must be equal but for the session id, the billing header and the order of concurrent hook
    outputs; nothing about git is ignored. Each side may hold several sessions' first requests (a setup's own
    start-up need not be deterministic: measured, a SessionStart hook that edits the repository races the
    CLI's git snapshot); the control passes when one of its requests equals one of the untouched setup's."""
    a = [normalise_request(r, {}, keep_branch=True) for r in control_requests]
    b = [normalise_request(r, {}, keep_branch=True) for r in untouched_requests]
    match = next(((i, j) for i, x in enumerate(a) for j, y in enumerate(b) if x == y), None)
    first_pair = diff_summary(a[0], b[0])
    out: dict[str, Any] = {
        "checked": True,
        "equal": match is not None,
        "exact": True,
        "compared": f"{control} against the untouched setup (its own copy-on-write view at the real paths)",
        "ignored": list(EXACT_IGNORED),
        "differences": [] if match is not None else first_pair,
        "sessions": {"control": len(a), "untouched": len(b)},
    }
    if len(a) > 1 or len(b) > 1:
        out["first_pair_differences"] = first_pair
        out["matched"] = None if match is None else {"control": match[0] + 1, "untouched": match[1] + 1}
        out["untouched_steady"] = len(set(b)) == 1
    return out


def fidelity_lines(fid: dict[str, Any]) -> list[str]:
    """The resampling in words, for the probe's output (empty when one pair was enough)."""
    sessions = fid.get("sessions") or {}
    n_c, n_u = int(sessions.get("control", 1)), int(sessions.get("untouched", 1))
    if n_c == 1 and n_u == 1:
        return []
    steady = (
        "the untouched setup's own sessions agreed with one another"
        if fid.get("untouched_steady")
        else "the untouched setup's own sessions differed from one another: its start-up is not deterministic "
        "(e.g. a SessionStart hook that edits the repository while the CLI takes its git snapshot)"
    )
    matched = fid.get("matched")
    found = (
        f"session {matched['control']} of the control equals session {matched['untouched']} of the untouched setup"
        if matched
        else "no session of the control equals any of the untouched setup's"
    )
    first = (fid.get("first_pair_differences") or ["?"])[0]
    return [
        f"shadow fidelity: the first pair of sessions differed ({first}); {n_c} control and {n_u} untouched "
        f"sessions in all: {found}; {steady}"
    ]

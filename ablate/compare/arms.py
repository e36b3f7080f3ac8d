"""Arms of a comparison: a name and the exact bytes the arm's file layer holds.

The ``[NAME=]PATH[@move:BLOCK|@duplicate:BLOCK]`` syntax and ``--block`` are README.md's "Arms". Three files the
user laid out themselves get the layout roles from ``--roles`` or from their content (:func:`layout_roles`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import permutations
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ablate.core.errors import UsageError
from ablate.setup.variants import Op, Rendered, Selector, Variant

if TYPE_CHECKING:
    from ablate.compare.model import RolesInfo

NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
_OPS: dict[str, Op] = {"move": "move", "moved": "move", "duplicate": "duplicate", "dup": "duplicate"}
_SUFFIX: dict[Op, str] = {"original": "", "move": "-moved", "duplicate": "-duplicated"}


@dataclass(frozen=True)
class Arm:
    """One arm: its name (a cell id too) and its rendered content."""

    name: str
    rendered: Rendered
    spec: str
    """What the user wrote."""

    @property
    def variant(self) -> Variant:
        return self.rendered.variant

    @property
    def fingerprint(self) -> str:
        return self.rendered.fingerprint

    def to_json(self) -> dict[str, object]:
        v = self.variant
        return {
            "name": self.name,
            "fingerprint": self.fingerprint,
            "source": str(v.source),
            "source_sha256": self.rendered.source_sha256,
            "op": v.op,
            "block": str(v.selector) if v.selector is not None else None,
            "bytes": len(self.rendered.data),
            "spec": self.spec,
        }


@dataclass(frozen=True)
class ArmSpec:
    """A parsed arm argument, before its file is read."""

    name: str | None
    variant: Variant
    spec: str


def parse_arm(text: str) -> ArmSpec:
    """Parse ``[NAME=]PATH[@move:BLOCK|@duplicate:BLOCK]`` (a path that exists as written is taken whole)."""
    raw = text
    name: str | None = None
    m = re.match(r"^([A-Za-z][A-Za-z0-9_-]{0,31})=(.+)$", text)
    if m and not Path(text).exists():
        name, text = m.group(1), m.group(2)
    op: Op = "original"
    selector: Selector | None = None
    if not Path(text).exists():
        t = re.match(r"^(.+?)@(move|moved|duplicate|dup):(.+)$", text)
        if t:
            text, op, selector = t.group(1), _OPS[t.group(2)], Selector.parse(t.group(3))
    path = Path(text).expanduser()
    if not path.is_file():
        raise UsageError(
            f"arm {raw!r}: {path} is not a file",
            hint="an arm is [NAME=]PATH[@move:HEADING|@duplicate:HEADING] (or marker:NAME for the block)",
        )
    return ArmSpec(name, Variant(path.resolve(), op, selector), raw)


def _slug(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-_")
    if not s or not s[0].isalpha():
        s = "arm-" + s
    return s[:32].rstrip("-_")


def default_names(specs: Sequence[ArmSpec]) -> list[str]:
    """Names for arms given without one: the file stem (plus -moved/-duplicated), made unique."""
    given = {s.name for s in specs if s.name}
    out: list[str] = []
    for i, s in enumerate(specs):
        if s.name:
            out.append(s.name)
            continue
        v = s.variant
        suffix = _SUFFIX[v.op]
        candidates = [
            _slug(v.source.stem)[: 32 - len(suffix)] + suffix,
            _slug(f"{v.source.parent.name}-{v.source.stem}")[: 32 - len(suffix)] + suffix,
            f"arm{i + 1}{suffix}",
        ]
        others = [_slug(o.variant.source.stem) + _SUFFIX[o.variant.op] for j, o in enumerate(specs) if j != i]
        pick = next(
            (c for c in candidates if c not in given and c not in out and c not in others), candidates[-1]
        )
        out.append(pick)
    return out


def expand_block(specs: Sequence[ArmSpec], block: str | None) -> list[ArmSpec]:
    """``--block`` with one plain file: the three arms ``original``, ``moved``, ``duplicated``."""
    if block is None:
        return list(specs)
    if len(specs) != 1 or specs[0].variant.op != "original":
        raise UsageError(
            "--block makes the three layout arms from ONE file",
            hint="pass a single file with --block, or write each arm as PATH@move:BLOCK / PATH@duplicate:BLOCK",
        )
    sel = Selector.parse(block)
    src = specs[0].variant.source
    base = specs[0].spec
    return [
        ArmSpec("original", Variant(src), base),
        ArmSpec("moved", Variant(src, "move", sel), f"{base}@move:{sel}"),
        ArmSpec("duplicated", Variant(src, "duplicate", sel), f"{base}@duplicate:{sel}"),
    ]


def build_arms(texts: Sequence[str], block: str | None = None) -> list[Arm]:
    """Parse, name and render the arms; at least two, unique names, each file read exactly once."""
    specs = expand_block([parse_arm(t) for t in texts], block)
    if len(specs) < 2:
        raise UsageError(
            f"a comparison needs at least two arms (got {len(specs)})",
            hint="pass two or more files, or one file with --block HEADING for the layout experiment",
        )
    names = default_names(specs)
    seen: set[str] = set()
    for name, s in zip(names, specs, strict=True):
        if not NAME_RE.match(name):
            raise UsageError(
                f"arm {s.spec!r}: name {name!r} must start with a letter and hold at most 32 letters, "
                "digits, '-' or '_'"
            )
        if name in seen:
            raise UsageError(f"arm name {name!r} is used twice", hint="name arms explicitly: NAME=PATH")
        seen.add(name)
    return [Arm(name, s.variant.render(), s.spec) for name, s in zip(names, specs, strict=True)]


Role = Literal["original", "moved", "duplicated"]
ROLES: tuple[Role, Role, Role] = ("original", "moved", "duplicated")
#: How the roles were found: made by ``--block``, given by ``--roles``, or recognised from the content.
RolesFrom = Literal["block", "roles option", "content"]


def _roles(original: Arm, moved: Arm, duplicated: Arm, found_by: RolesFrom) -> RolesInfo:
    from ablate.compare.model import RolesInfo  # pydantic: loaded only when needed

    return RolesInfo(original=original.name, moved=moved.name, duplicated=duplicated.name, found_by=found_by)


def parse_roles(text: str) -> tuple[Role, Role, Role]:
    """``--roles moved,original,duplicated``: the role of each arm, in the order the arms were given."""
    words = [w.strip() for w in text.split(",")]
    if sorted(words) != sorted(ROLES):
        raise UsageError(
            f"--roles {text!r}: expected the three words original, moved, duplicated, each once",
            hint="name the role of each arm in the order the arms are given, e.g. --roles original,moved,duplicated",
        )
    first, second, third = (next(r for r in ROLES if r == w) for w in words)
    return first, second, third


def _lines(data: bytes) -> list[str]:
    """The non-blank lines, trailing white space dropped (moving a block changes the blank lines around it)."""
    return [line.rstrip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]


def _subsequence(short: list[str], long: list[str]) -> bool:
    it = iter(long)
    return all(any(x == y for y in it) for x in short)


def _repeats(original: list[str], duplicated: list[str]) -> bool:
    """``duplicated`` holds every line of ``original`` plus at least one more copy of some of them, nothing new."""
    have, extra = Counter(original), Counter(duplicated) - Counter(original)
    return bool(extra) and not Counter(original) - Counter(duplicated) and all(line in have for line in extra)


def _by_content(arms: Sequence[Arm]) -> RolesInfo | None:
    """moved: the original's lines in another order; duplicated: the original's lines plus repeated ones, in the
    original's order (a tie between two candidate originals goes to the one the duplicated file starts with)."""
    lines = {a.name: _lines(a.rendered.data) for a in arms}
    found: list[tuple[Arm, Arm, Arm]] = []
    for o, m, d in permutations(arms):
        lo, lm, ld = lines[o.name], lines[m.name], lines[d.name]
        if lo != lm and Counter(lo) == Counter(lm) and _repeats(lo, ld) and _subsequence(lo, ld):
            found.append((o, m, d))
    if len(found) > 1:
        found = [f for f in found if lines[f[2].name][: len(lines[f[0].name])] == lines[f[0].name]]
    if len(found) != 1:
        return None
    o, m, d = found[0]
    return _roles(o, m, d, "content")


def layout_roles(arms: Sequence[Arm], roles: Sequence[Role] | None = None) -> RolesInfo | None:
    """The layout experiment's three arms by role: given by ``roles`` (one per arm, in order), made by
    ``--block`` (one source file, one block), or recognised from three files' content; else None."""
    if roles is not None:
        if len(arms) != 3:
            raise UsageError(f"--roles names three arms; this comparison has {len(arms)}")
        by_role = dict(zip(roles, arms, strict=True))
        return _roles(by_role["original"], by_role["moved"], by_role["duplicated"], "roles option")
    if len(arms) != 3:
        return None
    by_op = {a.variant.op: a for a in arms}
    if set(by_op) == {"original", "move", "duplicate"}:
        sources = {a.variant.source for a in arms}
        selectors = {str(a.variant.selector) for a in arms if a.variant.selector is not None}
        if len(sources) == 1 and len(selectors) == 1:
            return _roles(by_op["original"], by_op["move"], by_op["duplicate"], "block")
    return _by_content(arms)

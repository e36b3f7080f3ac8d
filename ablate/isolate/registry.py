"""The isolation backends, by name: the one place that lists them, chooses one and makes it.

Each backend module declares a :class:`~ablate.isolate.backend.BackendKind` (``KIND``); every other stage asks
this registry about the backend a run recorded (``capabilities_of(manifest.isolation)``), never compares names
(docs/EXTENDING.md#adding-an-isolation-backend).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ablate.core.errors import UsageError
from ablate.folder.layout import IsolationInfo
from ablate.isolate import links, namespace
from ablate.isolate.backend import BackendKind, BackendOptions, Capabilities, EnvBackend, Support
from ablate.setup.layers import Catalog
from ablate.setup.load import Setup

#: Name → backend, in the order ablate tries them when no ``--isolation`` is given.
KINDS: dict[str, BackendKind] = {kind.name: kind for kind in (namespace.KIND, links.KIND)}
#: The backend a manifest without an ``isolation`` record ran (ablate before it recorded one).
UNRECORDED = links.KIND
#: The fields of the manifest's ``isolation`` the choice itself fills (the rest is filled by the run).
CHOICE_FIELDS = ("backend", "mode", "reason", "locked")


def register(kind: BackendKind) -> BackendKind:
    """Add (or replace) ``kind``; a new one is tried last when no ``--isolation`` is given."""
    KINDS[kind.name] = kind
    return kind


def kind_of(name: str) -> BackendKind | None:
    """The backend named ``name``; None for a name this ablate does not know (a folder made by another)."""
    return KINDS.get(name)


def recorded_kind(info: IsolationInfo | None) -> BackendKind | None:
    """The backend a run folder's manifest records (``UNRECORDED`` when it records none)."""
    return UNRECORDED if info is None else kind_of(info.backend)


def capabilities_of(info: IsolationInfo | None) -> Capabilities | None:
    """What the recorded backend guarantees; None when this ablate does not know it (claim nothing)."""
    kind = recorded_kind(info)
    return None if kind is None else kind.capabilities


def choose_isolation(requested: str | None) -> IsolationInfo:
    """The backend ``--isolation`` names (an error when it does not work here), else the first automatic one
    that works and locks its sessions (else that works); why, in the manifest's words."""
    if requested is not None:
        kind = KINDS.get(requested)
        if kind is None:
            raise UsageError(f"--isolation {requested}: unknown backend", hint=f"use {_names()}")
        support = kind.support()
        if not support.ok:
            raise UsageError(
                f"--isolation {requested} does not work here: {support.reason}",
                hint=f"leave --isolation out: ablate takes the first of {_names()} that works here",
            )
        return _chosen(kind, support, f"asked for with --isolation {requested}: ")
    refused: list[str] = []
    unlocked: IsolationInfo | None = None
    for kind in KINDS.values():
        if not kind.auto:
            continue
        support = kind.support()
        if support.ok and support.locked:
            return _chosen(kind, support, "".join(f"{why}; " for why in refused))
        if support.ok:  # works, but its sessions would not be locked: a later one that locks them wins
            unlocked = unlocked or _chosen(kind, support, "".join(f"{why}; " for why in refused))
            refused.append(f"{kind.name} not locked here: {support.reason}")
        else:
            refused.append(f"{kind.name} unavailable: {support.reason}")
    if unlocked is not None:
        return unlocked
    raise UsageError("no isolation backend works here: " + "; ".join(refused), hint="run `ablate doctor`")


def _chosen(kind: BackendKind, support: Support, why: str) -> IsolationInfo:
    return IsolationInfo(
        backend=kind.name, mode=support.mode, reason=why + support.reason, locked=support.locked
    )


def choice_json(info: IsolationInfo) -> dict[str, Any]:
    """What was chosen and why, as probe.json and ``--json`` outputs record it."""
    return info.model_dump(mode="json", include=set(CHOICE_FIELDS))


def open_backend(
    backend: str, setup: Setup, catalog: Catalog, work_root: Path, options: BackendOptions = BackendOptions()
) -> EnvBackend:
    """The one place a backend object is made, by the name :func:`choose_isolation` chose."""
    kind = KINDS.get(backend)
    if kind is None:
        raise ValueError(f"unknown isolation backend {backend!r}")
    return kind.factory(setup, catalog, work_root, options)


def _names() -> str:
    names = list(KINDS)
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]

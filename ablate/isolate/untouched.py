"""The probe's untouched session (docs/ARCHITECTURE.md#proving-isolation): the user's own setup at the real
paths, copy-on-write, the config dir a plain copy with transcript history and credentials left out. What C0
must equal; the session writes nothing anywhere."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ablate.isolate.namespace import (
    ViewAtRealPaths,
    area_mount,
    fresh_uppers,
    mounts_below_tmp,
    tmp_area,
    write_spec,
)
from ablate.isolate.shadow_home import ACCOUNT, CREDENTIALS, copy_memory
from ablate.setup.load import Setup, linked_state


@dataclass
class UntouchedView(ViewAtRealPaths):
    """The user's own setup at the real paths, copy-on-write: what C0 must equal."""

    root: Path
    spec: Path
    config_copy: Path
    """The lower of the config dir: a plain copy of the user's (the probe neutralises its endpoint keys)."""
    home: Path
    repo: Path
    real_config: Path


#: Config-dir entries left out of the untouched copy: CLI-written history, and the credentials (the probe
#: uses an API key against its capture endpoint).
UNTOUCHED_SKIPPED = (CREDENTIALS, "telemetry", "debug", "file-history", "todos", "history.jsonl")


def untouched_copy_filter(config_dir: Path) -> tuple[Callable[[str, list[str]], list[str]], dict[str, Path]]:
    """The ``copytree`` ignore function of an untouched copy of ``config_dir`` (history, credentials and what
    a link hides left out; of ``projects/<slug>/`` only the memory), and the CLI folders behind links."""
    linked = linked_state(config_dir, ("projects", "todos", "file-history", "sessions", "telemetry"))
    hidden = {str(t) for t in linked.values()}

    def ignore(folder: str, names: list[str]) -> list[str]:
        rel = Path(folder).relative_to(config_dir).parts
        out = [n for n in names if os.path.realpath(os.path.join(folder, n)) in hidden]
        if len(rel) == 2 and rel[0] == "projects":
            out += [n for n in names if n != "memory"]
        if not rel:
            out += [n for n in names if n in UNTOUCHED_SKIPPED or n in linked]
        return out

    return ignore, linked


def copy_untouched_config(setup: Setup, dest: Path) -> dict[str, Path]:
    """A plain copy of the config dir at ``dest``; returns the CLI-written folders left out as links."""
    ignore, linked = untouched_copy_filter(setup.config_dir)
    shutil.copytree(setup.config_dir, dest, symlinks=True, ignore=ignore)
    if "projects" in linked:
        copy_memory(setup, dest, setup.memory_slug)
    account = setup.account_state
    if account is not None and not (dest / ACCOUNT).exists():
        shutil.copy2(account, dest / ACCOUNT)
    return linked


def untouched_view(setup: Setup, root: Path, programs: Sequence[Path] = ()) -> UntouchedView:
    """The live home and repository and a copy of the config dir at their real paths, each copy-on-write
    (``programs``: what its sessions run, :func:`~ablate.isolate.namespace.tmp_area`)."""
    config_copy = root / "config"
    # a CLI-written folder left out because it was a link: a real, empty folder (the session's transcript
    # must land in the view's config dir)
    for rel in copy_untouched_config(setup, config_copy):
        (config_copy / rel).mkdir(exist_ok=True)
    view = UntouchedView(root, root / "view.json", config_copy, setup.home, setup.repo, setup.config_dir)
    mounts = [
        *tmp_area(root, mounts_below_tmp(), (setup.home, setup.repo, setup.config_dir), programs),
        area_mount(root, "home", setup.home, setup.home),
        area_mount(root, "repo", setup.repo, setup.repo),
        area_mount(root, "config", setup.config_dir, config_copy),
    ]
    fresh_uppers(root, ("tmp", "home", "repo", "config"))
    (root / "up" / "objects").mkdir()
    write_spec(view.spec, mounts, setup.repo)
    return view

"""The example setup installed the way published setups are: a dotfiles checkout linked into the home.

Shape (``H`` the fake home)::

    H/.claude -> H/dotfiles/claude            the config dir is itself a link (absolute)
    H/dotfiles/claude/CLAUDE.md -> H/dotfiles/shared/CLAUDE.md     absolute links for files (stow-like:
    H/dotfiles/claude/axioms.md -> H/dotfiles/shared/axioms.md     every target in one folder)
    H/dotfiles/claude/lessons.md -> H/dotfiles/shared/lessons.md
    H/dotfiles/claude/agents/doc-summarizer.md -> H/dotfiles/shared/agents/doc-summarizer.md
    H/dotfiles/claude/skills -> ../skills                         the skills folder a (relative) link inside
                                                                  the linked config dir
    H/dotfiles/skills/<x> -> ../../.agents/skills/<x>             skill folders as relative links, as skill
                                                                  managers write them (resolved from the
                                                                  *physical* folder, never ~/.claude/skills)
    H/.agents/skills/release-notes -> H/.local/share/skill-store/release-notes
                                                                  so skills/release-notes is a chain: a
                                                                  relative link to an absolute one
    H/dotfiles/skills/gone -> ../../.agents/skills/gone           one dangling
    H/dotfiles/claude/plugins/cache/local/notes-tool/1.0.0 -> H/.cache/plugin-store/notes-tool
                                                                  a link into a plugin cache (a plugin not
                                                                  installed: on disk, never listed)
    H/code/greeter                                                the repository, under the home
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NamedTuple

from ablate.core.slug import slug as slug_for
from ablate.setup.cells import CellSet, load_cell_set
from ablate.setup.examples import ExampleSetup, materialise_example
from ablate.setup.layers import Catalog, load_catalog
from ablate.setup.load import Setup, load_setup

#: Files of the config dir moved into the dotfiles' shared folder and linked back by absolute links.
LINKED_FILES = ("CLAUDE.md", "axioms.md", "lessons.md", "agents/doc-summarizer.md")
#: The skill reached through a chain of two links (relative, then absolute).
CHAINED_SKILL = "release-notes"
#: The plugin cache entry that is a link out of the config dir, and where it points (under the home).
PLUGIN_LINK = "plugins/cache/local/notes-tool/1.0.0"
PLUGIN_STORE = ".cache/plugin-store/notes-tool"


def dotfiles_setup(dest: Path) -> ExampleSetup:
    """The example setup under ``dest`` in the shape above."""
    ex = materialise_example(dest)
    home = ex.home
    dotfiles = home / "dotfiles"
    physical = dotfiles / "claude"
    dotfiles.mkdir()
    shutil.move(str(ex.config_dir), physical)
    ex.config_dir.symlink_to(physical)
    shared = dotfiles / "shared"
    for rel in LINKED_FILES:
        (shared / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(physical / rel), shared / rel)
        (physical / rel).symlink_to(shared / rel)
    _link_skills(home, physical)
    _link_plugin_cache(home, physical)
    repo = home / "code" / ex.repo.name
    repo.parent.mkdir()
    shutil.move(str(ex.repo), repo)
    projects = physical / "projects"
    os.rename(projects / slug_for(str(ex.repo)), projects / slug_for(str(repo)))
    return ExampleSetup(home=home, config_dir=ex.config_dir, repo=repo)


class Loaded(NamedTuple):
    """The dotfiles setup with what the tests build cells from."""

    example: ExampleSetup
    setup: Setup
    catalog: Catalog
    cells: CellSet
    """The layered cells."""


def loaded_dotfiles(dest: Path) -> Loaded:
    """:func:`dotfiles_setup` under ``dest``, loaded, with the catalog and the layered cells."""
    ex = dotfiles_setup(dest)
    catalog = load_catalog()
    setup = load_setup(ex.config_dir, ex.repo, home=ex.home)
    return Loaded(ex, setup, catalog, load_cell_set("layered", catalog))


def _link_skills(home: Path, physical: Path) -> None:
    """The config dir's skills moved to ``~/.agents/skills`` (one further on to a skill store) and reached
    through ``skills -> ../skills``, a folder of relative links."""
    agents = home / ".agents" / "skills"
    agents.mkdir(parents=True)
    linked = home / "dotfiles" / "skills"
    linked.mkdir()
    for skill in sorted((physical / "skills").iterdir()):
        shutil.move(str(skill), agents / skill.name)
        (linked / skill.name).symlink_to(Path("..", "..", ".agents", "skills", skill.name))
    (physical / "skills").rmdir()
    (physical / "skills").symlink_to(Path("..", "skills"))
    (linked / "gone").symlink_to(Path("..", "..", ".agents", "skills", "gone"))
    store = home / ".local" / "share" / "skill-store" / CHAINED_SKILL
    store.parent.mkdir(parents=True)
    shutil.move(str(agents / CHAINED_SKILL), store)
    (agents / CHAINED_SKILL).symlink_to(store)


def _link_plugin_cache(home: Path, physical: Path) -> None:
    """A plugin's cached version that is a link to a store outside the config dir; not installed."""
    store = home / PLUGIN_STORE
    (store / ".claude-plugin").mkdir(parents=True)
    (store / ".claude-plugin" / "plugin.json").write_text('{"name": "notes-tool", "version": "1.0.0"}\n')
    (store / "skills" / "take-notes").mkdir(parents=True)
    (store / "skills" / "take-notes" / "SKILL.md").write_text(
        "---\nname: take-notes\ndescription: Keep running notes of a session\n---\n\nWrite notes.md.\n"
    )
    link = physical / PLUGIN_LINK
    link.parent.mkdir(parents=True)
    link.symlink_to(store)

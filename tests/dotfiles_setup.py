"""The example setup installed the way published setups are: a dotfiles checkout linked into the home.

Shape (``H`` the fake home)::

    H/.claude -> H/dotfiles/claude            the config dir is itself a link (absolute)
    H/dotfiles/claude/CLAUDE.md -> H/dotfiles/shared/CLAUDE.md     absolute links for files (stow-like:
    H/dotfiles/claude/axioms.md -> H/dotfiles/shared/axioms.md     every target in one folder)
    H/dotfiles/claude/lessons.md -> H/dotfiles/shared/lessons.md
    H/dotfiles/claude/agents/doc-summarizer.md -> H/dotfiles/shared/agents/doc-summarizer.md
    H/dotfiles/claude/skills/<x> -> ../../../.agents/skills/<x>    relative links, as skill managers write
                                                                  them (resolved from the *physical* folder)
    H/dotfiles/claude/skills/gone -> ../../../.agents/skills/gone  one dangling
    H/code/greeter                                                the repository, under the home
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ablate.core.slug import slug as slug_for
from ablate.setup.examples import ExampleSetup, materialise_example

#: Files of the config dir moved into the dotfiles' shared folder and linked back by absolute links.
LINKED_FILES = ("CLAUDE.md", "axioms.md", "lessons.md", "agents/doc-summarizer.md")


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
    agents = home / ".agents" / "skills"
    agents.mkdir(parents=True)
    for skill in sorted((physical / "skills").iterdir()):
        shutil.move(str(skill), agents / skill.name)
        skill.symlink_to(Path("..", "..", "..", ".agents", "skills", skill.name))
    (physical / "skills" / "gone").symlink_to(Path("..", "..", "..", ".agents", "skills", "gone"))
    repo = home / "code" / ex.repo.name
    repo.parent.mkdir()
    shutil.move(str(ex.repo), repo)
    projects = physical / "projects"
    os.rename(projects / slug_for(str(ex.repo)), projects / slug_for(str(repo)))
    return ExampleSetup(home=home, config_dir=ex.config_dir, repo=repo)

"""Which plugins under a config dir's ``plugins/`` the CLI loads: those installed *and* enabled
(docs/CLAUDE-CODE.md#plugins-loaded)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ablate.setup.layers import json_keys

REGISTRIES = ("installed_plugins.json", "installed_plugins_v2.json")
SETTINGS = ("settings.json", "settings.local.json")


@dataclass(frozen=True)
class Plugins:
    """The plugins a config dir has installed, and the folders of those also enabled."""

    installed: list[str] = field(default_factory=list)
    enabled: list[str] = field(default_factory=list)
    roots: list[str] = field(default_factory=list)
    """Real paths of the installed and enabled plugins' folders."""

    def loads(self, path: Path) -> str | None:
        """The path of ``path`` inside the enabled plugin holding it (None: no enabled plugin holds it)."""
        real = os.path.realpath(path)
        for root in self.roots:
            if real.startswith(root + os.sep):
                return os.path.relpath(real, root)
        return None


def _install_paths(entry: object) -> list[str]:
    items = entry if isinstance(entry, list) else [entry]
    return [
        str(item["installPath"])
        for item in items
        if isinstance(item, dict) and isinstance(item.get("installPath"), str)
    ]


def _enabled_names(settings_files: list[Path]) -> set[str]:
    names: set[str] = set()
    for path in settings_files:
        data = json_keys(path) or {}
        enabled = data.get("enabledPlugins")
        if isinstance(enabled, dict):
            for name, on in enabled.items():
                if on is True:
                    names.add(str(name))
                else:
                    names.discard(str(name))
    return names


def plugins_of(config_dir: Path, repo: Path | None = None) -> Plugins:
    """The installed plugins of ``config_dir`` and which of them the user's (and the project's) settings
    enable; later settings files win (user, user local, project, project local)."""
    installed: dict[str, list[str]] = {}
    for name in REGISTRIES:
        data = json_keys(config_dir / "plugins" / name) or {}
        plugins = data.get("plugins")
        if not isinstance(plugins, dict):
            continue
        for pid, entry in plugins.items():
            paths = _install_paths(entry)
            if paths:
                installed.setdefault(str(pid), []).extend(p for p in paths if p not in installed.get(pid, []))
    files = [config_dir / s for s in SETTINGS]
    if repo is not None:
        files += [repo / ".claude" / s for s in SETTINGS]
    enabled = sorted(pid for pid in _enabled_names(files) if pid in installed)
    roots = []
    for pid in enabled:
        for raw in installed[pid]:
            path = Path(raw) if os.path.isabs(raw) else config_dir / "plugins" / raw
            roots.append(os.path.realpath(path))
    return Plugins(sorted(installed), enabled, roots)

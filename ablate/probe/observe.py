"""One probe session and what it showed: the session's environment, its run, the captured requests and the
transcript's load records; the shadows only the probe needs (baseline, untouched setup)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ablate.core.cache import cache_dir, private_dir
from ablate.core.claude import ClaudeBinary, StartPurpose, claude_argv, count_start, find_transcript
from ablate.core.constants import DEFAULT_MODEL
from ablate.core.errors import AblateError
from ablate.core.fsutil import atomic_write_json
from ablate.core.proc import run_process
from ablate.core.slug import slug
from ablate.isolate.procenv import SETTINGS_HELPERS, force_capture, process_env
from ablate.isolate.shadow_home import ACCOUNT, CREDENTIALS
from ablate.isolate.shadowfs import anchor_links
from ablate.isolate.untouched import copy_untouched_config, untouched_view
from ablate.mine.attachments import read_load_evidence
from ablate.probe.fingerprints import LayerPrint, needle_in
from ablate.setup.examples import git
from ablate.setup.load import Setup
from ablate.sim import iter_requests, request_text

PROBE_PROMPT = "ablate probe: reply with the single word OK."
PROBE_MODEL = DEFAULT_MODEL
_ENDPOINT_ENV = re.compile(
    r"^(ANTHROPIC_|CLAUDE_CODE_USE_|AWS_|CLOUD_ML_|VERTEX_|HTTPS?_PROXY|NO_PROXY)", re.I
)


@dataclass
class Observation:
    """What one probe session showed."""

    session_id: str
    exit_code: int
    duration_s: float
    transcript: Path | None
    request_text: str = ""
    instruction_files: list[dict[str, str]] = field(default_factory=list)
    listed: set[str] = field(default_factory=set)
    hooks_fired: list[str] = field(default_factory=list)
    models: set[str] = field(default_factory=set)
    requests: int = 0
    first_request: dict[str, Any] | None = None
    error: str = ""

    config_dir: str = ""
    """The session's config dir: hook commands name it where the user's settings named the real one."""

    def hook_seen(self, needle: str) -> bool:
        """Whether a record names the hook command ``needle`` (config paths canonicalised to <CONFIG>)."""
        return any(canon_command(c, [self.config_dir]) == needle for c in self.hooks_fired)

    def shows(self, p: LayerPrint, needle: str) -> bool:
        if p.kind == "hooks":
            return self.hook_seen(needle)
        if p.kind == "names" and not needle.startswith("mcp__") and needle in self.listed:
            return True
        if needle_in(p.kind, needle, self.request_text):
            return True
        return p.kind == "text" and any(needle in f.get("content", "") for f in self.instruction_files)


def canon_command(command: str, config_dirs: Sequence[str]) -> str:
    """A hook command with every spelling of the config dir replaced by ``<CONFIG>`` (cells rewrite it)."""
    for d in sorted((d for d in config_dirs if d), key=len, reverse=True):
        command = re.sub(re.escape(d) + r"(?![A-Za-z0-9_\-])", "<CONFIG>", command)
    return command


# ---------------------------------------------------------------------------------------------------------
# Running one session and reading what it showed


def links_fence(setup: Setup, root: Path, cwd: Path) -> Callable[[list[str]], list[str]]:
    """A ``links`` probe session's command, fenced as a run's (:func:`ablate.isolate.seal.fenced`, only
    ``root`` writable): a hook writing through the home's links fails (EROFS); unfenced, the probe's
    before/after listing fails the probe, naming the files."""
    from ablate.isolate.seal import fenced
    from ablate.isolate.worktree import objects_dir

    visible = [setup.home, setup.config_dir, setup.repo, objects_dir(setup.repo)]
    return lambda argv: fenced(argv, root=root, cwd=cwd, visible=visible)


def _session_env(config_dir: Path, home: Path, base_url: str, tmp: Path) -> dict[str, str]:
    """The env of the baseline and untouched sessions: the one allow-list, forced to the capture endpoint,
    with ``tmp`` as TMPDIR (the CLI makes its own folders there: the probe's, never the user's TMPDIR)."""
    return force_capture(process_env(os.environ, home=home, config_dir=config_dir, tmpdir=tmp), base_url)


@dataclass(frozen=True)
class Capture:
    """Where a probe's sessions run: the CLI, the probe's folder and the capture endpoint."""

    claude: ClaudeBinary
    root: Path
    base_url: str

    @property
    def log(self) -> Path:
        return self.root / "requests.jsonl"


def _run(
    cap: Capture,
    *,
    purpose: StartPurpose,
    cwd: Path,
    env: dict[str, str],
    config_dir: Path,
    wrap: Callable[[list[str]], list[str]] | None = None,
    shown_config: Path | None = None,
) -> Observation:
    sid = str(uuid.uuid4())
    argv = claude_argv(cap.claude.path, prompt=PROBE_PROMPT, model=PROBE_MODEL, session_id=sid, max_turns=1)
    if wrap is not None:
        argv = wrap(argv)  # its own copy-on-write view (namespace), or the links write fence
    count_start(purpose)
    stdout = cap.root / "stdout" / f"{sid}.stdout.json"
    res = run_process(argv, cwd=cwd, env=env, timeout=120, stdout_path=stdout)
    transcript = find_transcript(config_dir, sid)
    obs = Observation(
        sid, res.returncode, res.duration_s, transcript, config_dir=str(shown_config or config_dir)
    )
    if res.timed_out:
        obs.error = "timed out after 120 s"
    elif res.returncode != 0:
        obs.error = f"claude exited {res.returncode}: {res.stderr_tail.strip()[-300:]}"
    if transcript is None:
        obs.error = obs.error or "no transcript was written (an exit code of 0 is no proof the session ran)"
    texts = []
    for req in iter_requests(cap.log):
        if req.session_id == sid and req.is_messages and isinstance(req.body, dict):
            obs.requests += 1
            texts.append(request_text(req.body))
            if req.model:
                obs.models.add(req.model)
            if obs.first_request is None:
                obs.first_request = req.body
    obs.request_text = "\n".join(texts)
    if transcript is not None:
        _read_transcript(transcript, obs)
    if obs.requests == 0 and not obs.error:
        obs.error = "the CLI sent no request to the capture endpoint"
    return obs


def _read_transcript(path: Path, obs: Observation) -> None:
    evidence = read_load_evidence(path)
    obs.hooks_fired.extend(evidence.hook_commands)
    obs.instruction_files.extend(evidence.instruction_files)
    obs.listed.update(evidence.listed)


# ---------------------------------------------------------------------------------------------------------
# Shadows that only the probe needs


def neutralise(config_dir: Path, *, with_mcp: bool) -> list[str]:
    """Keep the probe's traffic on loopback: drop endpoint/auth ``env`` keys and credential helpers from
    settings.json, MCP servers unless ``with_mcp``, and the credentials link (an API key is used)."""
    notes: list[str] = []
    settings = config_dir / "settings.json"
    if isinstance(data := _own_json(settings), dict):
        for key in [k for k in SETTINGS_HELPERS if k in data]:  # each could send the traffic off loopback
            del data[key]
            notes.append(f"settings.json {key} neutralised for the probe")
        env = data["env"] if isinstance(data.get("env"), dict) else {}
        for k in [k for k in env if _ENDPOINT_ENV.match(k)]:
            del env[k]
            notes.append(f"settings.json env.{k} neutralised for the probe")
        if (not with_mcp and data.pop("mcpServers", None) is not None) or notes:
            settings.write_text(json.dumps(data, indent=2), encoding="utf-8")
    account = config_dir / ACCOUNT
    if (
        not with_mcp
        and isinstance(data := _own_json(account), dict)
        and data.pop("mcpServers", None) is not None
    ):
        account.write_text(json.dumps(data, indent=2), encoding="utf-8")
    creds = config_dir / CREDENTIALS
    if creds.is_symlink() or creds.is_file():
        creds.unlink()  # the cell's own link or copy (namespace): the probe uses an API key
    return notes


def _own_json(path: Path) -> Any:
    """The JSON in the cell's own file ``path`` (None: absent, a link, or not JSON)."""
    if not path.is_file() or path.is_symlink():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return None


def _plain_copy(setup: Setup, dest: Path) -> Path:
    """The untouched setup's stand-in: a plain copy of the config dir, transcript history left out."""
    home = dest / "home"
    config = home / ".claude"
    copy_untouched_config(setup, config)
    anchor_links(config, setup.config_dir)  # a relative link (skills/x -> ../../.agents/…) leads where it did
    settings = config / "settings.json"
    if settings.is_file() and not settings.is_symlink():
        # hooks that name the real config dir would otherwise run against (and write into) it
        settings.write_text(settings.read_text(encoding="utf-8").replace(str(setup.config_dir), str(config)))
    for entry in setup.home.iterdir():
        if entry.name not in (".claude", ACCOUNT):
            (home / entry.name).symlink_to(entry)
    return config


def _baseline(cap: Capture) -> Observation:
    """A session with no setup at all: an empty config dir and an empty one-commit repository."""
    base = cap.root / "baseline"
    home, repo = base / "home", base / "repo"
    (home / ".claude").mkdir(parents=True)
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "empty")
    (base / "tmp").mkdir()
    env = _session_env(home / ".claude", home, cap.base_url, base / "tmp")
    return _run(cap, purpose="baseline", cwd=repo, env=env, config_dir=home / ".claude")


def baseline_key(claude: ClaudeBinary, env: dict[str, str], root: Path, base_url: str) -> str:
    """What the baseline depends on: CLI build, prompt, model, environment (less what differs per run)."""
    stable = sorted((k, v) for k, v in env.items() if str(root) not in v and v != base_url)
    text = orjson.dumps([claude.sha256, PROBE_PROMPT, PROBE_MODEL, stable]).decode()
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def cached_baseline(cap: Capture) -> Observation:
    """:func:`_baseline`, kept per :func:`baseline_key` in ablate's cache (one CLI build always shows the same
    generic text): only the request's text and the listed names; an unusable cache is no error."""
    base = cap.root / "baseline"
    env = _session_env(base / "home" / ".claude", base / "home", cap.base_url, base / "tmp")
    folder = cache_dir()
    path = folder / f"probe-baseline-{baseline_key(cap.claude, env, cap.root, cap.base_url)}.json"
    try:
        private_dir(folder)  # what the probe treats as generic must be this user's own
        data = orjson.loads(path.read_bytes())
        return Observation(
            "cached", 0, 0.0, None, request_text=str(data["request_text"]), listed=set(data["listed"])
        )
    except (OSError, ValueError, TypeError, KeyError, AblateError):
        pass
    obs = _baseline(cap)
    if not obs.error and obs.request_text:
        with contextlib.suppress(OSError, AblateError):
            atomic_write_json(path, {"request_text": obs.request_text, "listed": sorted(obs.listed)})
    return obs


def _untouched(setup: Setup, cap: Capture) -> tuple[Observation, dict[str, str]]:
    """The untouched setup (``links``): copies of the config dir and repository, under the write fence."""
    work = cap.root / "untouched"
    config = _plain_copy(setup, work)
    neutralise(config, with_mcp=False)
    repo = work / "repo" / setup.repo.name
    shutil.copytree(setup.repo, repo, symlinks=True)
    copy_slug = slug(str(repo))
    memory = config / "projects" / setup.memory_slug / "memory"
    if memory.is_dir():
        shutil.copytree(memory, config / "projects" / copy_slug / "memory", symlinks=True)
    (work / "tmp").mkdir(exist_ok=True)
    env = _session_env(config, config.parent, cap.base_url, work / "tmp")
    wrap = links_fence(setup, work, repo)  # its home links to the real home's entries
    obs = _run(cap, purpose="fidelity", cwd=repo, env=env, config_dir=config, wrap=wrap)
    return obs, {
        **import_homes(setup.config_dir),
        str(config): "<CONFIG>",
        str(config.parent): "<HOME>",
        str(repo): "<CWD>",
        copy_slug: "<SLUG>",
    }


def import_homes(config_dir: Path) -> dict[str, str]:
    """The folders a linked top-level instruction file imports from (next to the link's target), each read
    as ``<CONFIG>``: a ``links`` cell imports its copies from its config dir."""
    out: dict[str, str] = {}
    for entry in sorted(config_dir.glob("*.md")):
        there = os.path.dirname(os.path.realpath(entry))
        if entry.is_symlink() and there != os.path.realpath(config_dir):
            out[there] = "<CONFIG>"
    return out


def _untouched_at_real_paths(setup: Setup, cap: Capture, like: Any, name: str = "untouched") -> Observation:
    """The untouched setup at the real paths in its own view (``root/name``), with the cells' environment."""
    view = untouched_view(setup, cap.root / name, (cap.claude.path,))
    neutralise(view.config_copy, with_mcp=False)
    # the view's /tmp is private: the cells' TMPDIR
    env = (
        _session_env(setup.config_dir, setup.home, cap.base_url, Path("/tmp"))
        if like is None
        else dict(like.env)
    )
    return _run(
        cap, purpose="fidelity", cwd=view.cwd, env=env, config_dir=view.config_dir, wrap=view.wrap,
        shown_config=setup.config_dir,
    )  # fmt: skip

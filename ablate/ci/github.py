"""``ablate ci init github``: a GitHub Actions workflow built as data, written as YAML (the jobs and the secret's
handling: README.md's "GitHub Actions")."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ablate import DIST_NAME, PINNED_CLAUDE_VERSION, __version__
from ablate.core.constants import DEFAULT_MODEL
from ablate.core.errors import UsageError

CHECKOUT = "actions/checkout@v4"
SETUP_PYTHON = "actions/setup-python@v5"
SETUP_NODE = "actions/setup-node@v4"
UPLOAD = "actions/upload-artifact@v4"
DOWNLOAD = "actions/download-artifact@v4"
#: GitHub runs at most 256 jobs from one matrix.
MAX_SHARDS = 256
RUNS = "${{ runner.temp }}/ablate-runs"
SHARDS = "${{ runner.temp }}/ablate-shards"


@dataclass(frozen=True)
class GithubOptions:
    shards: int = 2
    compare: str | None = None
    """Repository-relative file whose pull-request version is compared with the base branch's."""
    tasks: str = "tasks"
    cells: str = "layered"
    repeats: int = 3
    model: str = DEFAULT_MODEL
    layer: str = "user-claude-md"
    """Compare mode: the layer the compared file is (``repo-claude-md`` for the repository's CLAUDE.md)."""
    config_dir: str | None = None
    """Repository-relative folder copied to the runner's ~/.claude (the user side of the setup)."""
    require: tuple[str, ...] = ()
    secret: str = "ANTHROPIC_API_KEY"
    install: str = f"{DIST_NAME}=={__version__}"
    """What ``pip install`` gets: pinned (``ablate-claude==X``, or ``ablate-claude @ git+URL@SHA``; never
    ``ablate==X``, an unrelated project on PyPI)."""
    claude_version: str = PINNED_CLAUDE_VERSION
    paths: tuple[str, ...] = field(default_factory=tuple)
    """The ``paths`` filter: files whose change triggers the workflow."""


def _relative(value: str, option: str) -> str:
    p = PurePosixPath(value)
    if p.is_absolute() or ".." in p.parts or "\\" in value or not value.strip():
        raise UsageError(
            f"{option} {value!r}: expected a path relative to the repository root", hint="e.g. tasks/"
        )
    return str(p)


def check_options(opts: GithubOptions) -> None:
    """Refuse what the workflow could not run, before anything is written."""
    if not 1 <= opts.shards <= MAX_SHARDS:
        raise UsageError(f"--shards {opts.shards}: expected 1 to {MAX_SHARDS} (GitHub's matrix limit)")
    if opts.compare is not None and opts.shards != 1:
        raise UsageError(
            f"--shards {opts.shards} with --compare: a comparison runs its arms in one sweep, in one job",
            hint="drop --shards (or pass --shards 1) with --compare",
        )
    for value, option in _interpolated(opts):
        if option in ("--tasks", "--compare", "--config-dir"):
            _relative(value, option)
    if "==" not in opts.install and "@" not in opts.install:
        raise UsageError(
            f"--install {opts.install!r}: not pinned",
            hint=f"pin ablate: {DIST_NAME}==X.Y.Z, or '{DIST_NAME} @ git+https://…@<commit>'",
        )
    if not SECRET_NAME.fullmatch(opts.secret) or opts.secret.upper().startswith("GITHUB_"):
        raise UsageError(
            f"--secret {opts.secret!r}: not a GitHub secret name",
            hint="letters, digits and _, not starting with a digit or GITHUB_ (e.g. ANTHROPIC_API_KEY)",
        )
    for value, option in _interpolated(opts):
        if "${{" in value or any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise UsageError(
                f"{option} {value!r}: holds a GitHub expression (${{{{) or a control character",
                hint="pass a plain value: every value reaches the workflow's shell through an environment variable",
            )
    from ablate.ci.rules import parse_rule

    for r in opts.require:
        parse_rule(r)


#: A GitHub secret's name (GitHub refuses others, and those starting with ``GITHUB_``).
SECRET_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _interpolated(opts: GithubOptions) -> list[tuple[str, str]]:
    """Every option value the workflow carries (as an environment value or in a step)."""
    named = [
        (opts.tasks, "--tasks"),
        (opts.cells, "--cells"),
        (opts.model, "--model"),
        (opts.layer, "--layer"),
        (opts.install, "--install"),
        (opts.claude_version, "--claude-version"),
        (opts.compare, "--compare"),
        (opts.config_dir, "--config-dir"),
    ]
    return [(v, o) for v, o in named if v is not None] + [(r, "--require") for r in opts.require]


def _install(claude: bool = True) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = [{"uses": SETUP_PYTHON, "with": {"python-version": "3.12"}}]
    run = 'python -m pip install --quiet "$ABLATE_INSTALL"\nablate --version\n'
    if claude:
        steps.append({"uses": SETUP_NODE, "with": {"node-version": "22"}})
        run += 'npm install --global --no-audit --no-fund "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION"\n'
        run += "claude --version\n"
    steps.append({"name": "Install the pinned ablate and Claude Code", "run": run})
    return steps


def _setup_steps(opts: GithubOptions, *, fetch_all: bool = False) -> list[dict[str, Any]]:
    checkout: dict[str, Any] = {"uses": CHECKOUT, "with": {"persist-credentials": False}}
    if fetch_all:
        checkout["with"]["fetch-depth"] = 0
    steps = [checkout, *_install()]
    copy = 'mkdir -p "$HOME/.claude"\n'
    if opts.config_dir:
        copy += 'cp -a "$ABLATE_CONFIG_DIR/." "$HOME/.claude/"\n'
    steps.append({"name": "The user side of the setup (~/.claude)", "run": copy})
    return steps


def _probe_job(opts: GithubOptions) -> dict[str, Any]:
    cells = "$ABLATE_CELLS" if opts.compare is None else "binary"
    run = (
        f'ablate probe --cells "{cells}" --repo . --work "$RUNNER_TEMP/ablate-probe" --json '
        '> "$RUNNER_TEMP/probe.json"\n'
    )
    return {
        "name": "Probe (free: proves each cell differs in exactly its layer)",
        "runs-on": "ubuntu-latest",
        "timeout-minutes": 30,
        "steps": [
            *_setup_steps(opts),
            {"name": "ablate probe (no API key, no cost; exit 1 on a leak stops the workflow)", "run": run},
            _upload("ablate-probe", "${{ runner.temp }}/probe.json", 7),
        ],
    }


def _plan_job(opts: GithubOptions) -> dict[str, Any]:
    run = (
        'ablate plan --tasks "$ABLATE_TASKS" --cells "$ABLATE_CELLS" --repeats "$ABLATE_REPEATS" '
        '--model "$ABLATE_MODEL" --repo . --out "$RUNNER_TEMP/ablate-runs" --json > "$RUNNER_TEMP/plan.json"\n'
        "folder=$(python -c 'import json, sys; print(json.load(open(sys.argv[1]))[\"folder\"])' "
        '"$RUNNER_TEMP/plan.json")\n'
        'echo "run_id=$(basename "$folder")" >> "$GITHUB_OUTPUT"\n'
    )
    return {
        "name": "Plan",
        "needs": "probe",
        "runs-on": "ubuntu-latest",
        "timeout-minutes": 15,
        "outputs": {"run_id": "${{ steps.plan.outputs.run_id }}"},
        "steps": [
            *_setup_steps(opts),
            {"name": "ablate plan", "id": "plan", "run": run},
            _upload("ablate-plan", RUNS, 7, always=False),
        ],
    }


def _upload(
    name: str, path: str, days: int, extra: dict[str, Any] | None = None, *, always: bool = True
) -> dict[str, Any]:
    """An upload-artifact step (run whatever came before unless ``always`` is False)."""
    step: dict[str, Any] = {"if": "${{ always() }}"} if always else {}
    return step | {
        "uses": UPLOAD,
        "with": {"name": name, "path": path, **(extra or {}), "retention-days": days},
    }


def _secret_check(folder: str) -> str:
    """Shell lines that refuse a run folder holding the API key (deleted, never uploaded)."""
    return (
        f'if [ -n "$ANTHROPIC_API_KEY" ] && grep -rqF -- "$ANTHROPIC_API_KEY" "{folder}"; then\n'
        f'  echo "::error::the API key appears in the run folder; it is deleted, not uploaded"\n'
        f'  rm -rf "{folder}"\n'
        "  exit 1\n"
        "fi\n"
    )


def _api_key(opts: GithubOptions) -> dict[str, str]:
    """The step env that hands the sessions the API key (only the steps that run sessions get it)."""
    return {"ANTHROPIC_API_KEY": f"${{{{ secrets.{opts.secret} }}}}"}


def _shard_job(opts: GithubOptions) -> dict[str, Any]:
    n, key = opts.shards, _api_key(opts)
    run = (
        "code=0\n"
        f'ablate run --plan "$RUNNER_TEMP/ablate-runs/$RUN_ID" --shard "${{{{ matrix.shard }}}}/{n}" '
        '--out "$RUNNER_TEMP/ablate-shards" --jobs 2 || code=$?\n'
        + _secret_check("$RUNNER_TEMP/ablate-shards")
        + 'exit "$code"\n'
    )
    return {
        "name": "Shard ${{ matrix.shard }}/" + str(n),
        "needs": "plan",
        "runs-on": "ubuntu-latest",
        "timeout-minutes": 300,
        "strategy": {"fail-fast": False, "matrix": {"shard": list(range(1, n + 1))}},
        "steps": [
            *_setup_steps(opts),
            {"uses": DOWNLOAD, "with": {"name": "ablate-plan", "path": RUNS}},
            {
                "name": "Resume: this shard's folder from an earlier attempt, if any",
                "continue-on-error": True,
                "uses": DOWNLOAD,
                "with": {"name": "ablate-shard-${{ matrix.shard }}", "path": SHARDS},
            },
            {
                "name": "ablate run (this shard)",
                "env": {"RUN_ID": "${{ needs.plan.outputs.run_id }}", **key},
                "run": run,
            },
            _upload(
                "ablate-shard-${{ matrix.shard }}",
                SHARDS,
                7,
                {"overwrite": True, "if-no-files-found": "warn"},
            ),
        ],
    }


def _gate_lines(folder: str, opts: GithubOptions) -> str:
    require = "".join(f" --require {_sh(r)}" for r in opts.require)
    return (
        "set +e\n"
        f'ablate gate "{folder}" --summary "$RUNNER_TEMP/gate.md"{require}\n'
        "code=$?\n"
        'cat "$RUNNER_TEMP/gate.md" >> "$GITHUB_STEP_SUMMARY" 2>/dev/null || true\n'
        + INCONCLUSIVE_SH
        + 'exit "$code"\n'
    )


#: Exit 4 (the run could not detect the gate's threshold change) fails the job unless the repository variable
#: ``ABLATE_GATE_INCONCLUSIVE`` (the step's env) is ``pass``.
INCONCLUSIVE_SH = (
    'if [ "$code" = 4 ] && [ "${ABLATE_GATE_INCONCLUSIVE:-fail}" = pass ]; then\n'
    '  echo "ablate gate: inconclusive, passed as configured (ABLATE_GATE_INCONCLUSIVE=pass)"; code=0\n'
    "fi\n"
)
#: The gate step's env: the team's choice for an inconclusive gate (unset: it fails).
GATE_ENV = {"ABLATE_GATE_INCONCLUSIVE": "${{ vars.ABLATE_GATE_INCONCLUSIVE }}"}


def _sh(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _comment_step() -> dict[str, Any]:
    return {
        "name": "Post the gate's summary on the pull request",
        "if": "${{ always() && github.event.pull_request.head.repo.full_name == github.repository }}",
        "env": {"GH_TOKEN": "${{ github.token }}", "GH_REPO": "${{ github.repository }}"},
        "run": 'test -f "$RUNNER_TEMP/gate.md" || exit 0\n'
        'gh pr comment "${{ github.event.pull_request.number }}" --body-file "$RUNNER_TEMP/gate.md"\n',
    }


def _merge_job(opts: GithubOptions) -> dict[str, Any]:
    merged = "$RUNNER_TEMP/ablate-merged/$RUN_ID"
    run = (
        f'ablate merge "$RUNNER_TEMP"/ablate-shards/"$RUN_ID"-shard-*-of-{opts.shards} --out "{merged}"\n'
        f'cp "$RUNNER_TEMP/probe/probe.json" "{merged}/probe.json"\n'
        f'ablate report "{merged}" --format md,json\n'
    )
    return {
        "name": "Merge, report, gate",
        "needs": ["plan", "shard"],
        "if": "${{ !cancelled() && needs.plan.result == 'success' }}",
        "runs-on": "ubuntu-latest",
        "timeout-minutes": 30,
        "permissions": {"contents": "read", "pull-requests": "write"},
        "env": {"RUN_ID": "${{ needs.plan.outputs.run_id }}"},
        "steps": [
            *_install(claude=False),
            {"uses": DOWNLOAD, "with": {"name": "ablate-probe", "path": "${{ runner.temp }}/probe"}},
            {"uses": DOWNLOAD, "with": {"pattern": "ablate-shard-*", "path": SHARDS, "merge-multiple": True}},
            {"name": "ablate merge + report", "run": run},
            {"name": "ablate gate", "env": GATE_ENV, "run": _gate_lines(merged, opts)},
            _comment_step(),
            _upload("ablate-report", "${{ runner.temp }}/ablate-merged", 30),
        ],
    }


def _compare_job(opts: GithubOptions) -> dict[str, Any]:
    assert opts.compare is not None
    run = (
        'mkdir -p "$RUNNER_TEMP/base"\n'
        'git show "origin/$BASE_REF:$ABLATE_COMPARE" > "$RUNNER_TEMP/base/$ABLATE_COMPARE_NAME"\n'
        'ablate compare "old=$RUNNER_TEMP/base/$ABLATE_COMPARE_NAME" "new=$ABLATE_COMPARE" --tasks "$ABLATE_TASKS" '
        '--layer "$ABLATE_LAYER" --model "$ABLATE_MODEL" --repeats "$ABLATE_REPEATS" --repo . '
        '--out "$RUNNER_TEMP/ablate-compare" --yes --json > "$RUNNER_TEMP/compare-out.json" || test $? -eq 3\n'
        + _secret_check("$RUNNER_TEMP/ablate-compare")
    )
    return {
        "name": "Compare the pull request's version with the base branch's",
        "needs": "probe",
        "runs-on": "ubuntu-latest",
        "timeout-minutes": 300,
        "permissions": {"contents": "read", "pull-requests": "write"},
        "steps": [
            *_setup_steps(opts, fetch_all=True),
            {
                "name": "ablate compare",
                "env": {"BASE_REF": "${{ github.base_ref }}", **_api_key(opts)},
                "run": run,
            },
            {
                "name": "ablate gate",
                "env": GATE_ENV,
                "run": _gate_lines('$(ls -d "$RUNNER_TEMP"/ablate-compare/*/)', opts),
            },
            _comment_step(),
            _upload("ablate-compare", "${{ runner.temp }}/ablate-compare", 30),
        ],
    }


def workflow(opts: GithubOptions) -> dict[str, Any]:
    """The workflow as data (what ``.github/workflows/ablate.yml`` holds)."""
    check_options(opts)
    jobs: dict[str, Any] = {"probe": _probe_job(opts)}
    if opts.compare is None:
        jobs.update(plan=_plan_job(opts), shard=_shard_job(opts), merge=_merge_job(opts))
    else:
        jobs["compare"] = _compare_job(opts)
    return {
        "name": "ablate",
        "on": {"pull_request": {"paths": list(opts.paths) or ["**"]}},
        "permissions": {"contents": "read"},
        "concurrency": {"group": "ablate-${{ github.ref }}", "cancel-in-progress": True},
        "env": {
            "ABLATE_INSTALL": opts.install,
            "CLAUDE_CODE_VERSION": opts.claude_version,
            "ABLATE_MODEL": opts.model,
            "ABLATE_CELLS": opts.cells,
            "ABLATE_REPEATS": str(opts.repeats),
            "ABLATE_TASKS": opts.tasks,
            **({"ABLATE_CONFIG_DIR": opts.config_dir} if opts.config_dir else {}),
            **(
                {
                    "ABLATE_COMPARE": opts.compare,
                    "ABLATE_COMPARE_NAME": posixpath.basename(opts.compare),
                    "ABLATE_LAYER": opts.layer,
                }
                if opts.compare is not None
                else {}
            ),
        },
        "jobs": jobs,
    }


def trigger_paths(opts: GithubOptions, ablate_toml: Path | None = None) -> tuple[str, ...]:
    """The files whose change reruns the workflow: the stripped layers' (or compared) file, tasks, config, itself."""
    out: list[str] = []
    if opts.compare is not None:
        out.append(opts.compare)
    else:
        from ablate.run.prepare import load_cells

        catalog, cell_set = load_cells(opts.cells, ablate_toml)
        stripped = {lid for c in cell_set.cells for lid in c.stripped}
        for layer in catalog:
            if layer.side == "repo" and layer.id in stripped:
                out += [p + "**" if p.endswith("/") else p for p in layer.paths]
    out.append(opts.tasks.rstrip("/") + "/**")
    if opts.config_dir:
        out.append(opts.config_dir.rstrip("/") + "/**")
    out.append(".github/workflows/ablate.yml")
    return tuple(dict.fromkeys(out))

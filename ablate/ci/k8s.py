"""``ablate ci init k8s``: Kubernetes Jobs for a planned run — plan, an Indexed Job of shards, merge (README.md's
"Kubernetes"). A failed index is retried on its own and its folder is resumable, so the retry runs only what
is missing; the API key reaches the pods only as a ``secretKeyRef``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ablate import __version__
from ablate.ci.github import INCONCLUSIVE_SH
from ablate.core.constants import DEFAULT_MODEL
from ablate.core.errors import UsageError

#: Kubernetes object names (RFC 1123 labels): what a PVC or Secret name must look like.
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
MAX_SHARDS = 1000


@dataclass(frozen=True)
class K8sOptions:
    shards: int = 2
    image: str = f"ablate:{__version__}"
    """An image with the pinned ablate and Claude Code CLI, the repository at ``repo`` and the tasks."""
    volume: str = "ablate-runs"
    """The PersistentVolumeClaim that holds the run folders (ReadWriteMany for parallel shards)."""
    secret: str = "ablate-anthropic"
    secret_key: str = "api-key"
    tasks: str = "/workspace/repo/tasks"
    repo: str = "/workspace/repo"
    config_dir: str = "/workspace/claude-config"
    cells: str = "layered"
    repeats: int = 3
    model: str = DEFAULT_MODEL
    jobs: int = 2
    """Sessions each shard pod runs at once."""


def check_options(opts: K8sOptions) -> None:
    if not 1 <= opts.shards <= MAX_SHARDS:
        raise UsageError(f"--shards {opts.shards}: expected 1 to {MAX_SHARDS}")
    for value, option in ((opts.volume, "--volume"), (opts.secret, "--secret")):
        if not _NAME.match(value):
            raise UsageError(
                f"{option} {value!r}: not a Kubernetes object name",
                hint="lower-case letters, digits and '-', at most 63 characters, e.g. ablate-runs",
            )
    if not opts.image.strip() or any(c.isspace() for c in opts.image):
        raise UsageError(
            f"--image {opts.image!r}: not an image reference", hint="e.g. ghcr.io/you/ablate:0.1.0"
        )
    if ":" not in opts.image.rsplit("/", 1)[-1] and "@sha256:" not in opts.image:
        raise UsageError(
            f"--image {opts.image!r}: not pinned (no tag or digest)", hint="name a tag or a digest: IMAGE:TAG"
        )


def _values(**env: str) -> list[dict[str, Any]]:
    return [{"name": k, "value": v} for k, v in env.items()]


def _env(opts: K8sOptions, *, key: bool) -> list[dict[str, Any]]:
    env = _values(ABLATE_RUNS="/runs", ABLATE_REPO=opts.repo, ABLATE_CONFIG_DIR=opts.config_dir)
    if key:
        ref = {"secretKeyRef": {"name": opts.secret, "key": opts.secret_key}}
        env.append({"name": "ANTHROPIC_API_KEY", "valueFrom": ref})
    return env


def plan_command(opts: K8sOptions) -> str:
    return (
        "set -eu\n"
        'ablate probe --cells "$ABLATE_CELLS" --config-dir "$ABLATE_CONFIG_DIR" --repo "$ABLATE_REPO" --json '
        '> "$ABLATE_RUNS/probe.json"\n'
        'rm -rf "$ABLATE_RUNS/plan"\n'
        'ablate plan --tasks "$ABLATE_TASKS" --cells "$ABLATE_CELLS" --repeats "$ABLATE_REPEATS" '
        '--model "$ABLATE_MODEL" --config-dir "$ABLATE_CONFIG_DIR" --repo "$ABLATE_REPO" --out "$ABLATE_RUNS/plan"\n'
    )


#: Shell lines that find the one planned run under $ABLATE_RUNS/plan.
_FIND_PLAN = (
    'set -- "$ABLATE_RUNS"/plan/*/manifest.json\n'
    'if [ "$#" -ne 1 ] || [ ! -f "$1" ]; then\n'
    '  echo "expected exactly one planned run under $ABLATE_RUNS/plan (run the ablate-plan Job first)" >&2\n'
    "  exit 2\n"
    "fi\n"
    'plan=$(dirname "$1")\n'
)


def shard_command(opts: K8sOptions) -> str:
    return (
        "set -eu\n"
        + _FIND_PLAN
        + f'exec ablate run --plan "$plan" --shard "$((JOB_COMPLETION_INDEX + 1))/{opts.shards}" '
        f'--config-dir "$ABLATE_CONFIG_DIR" --repo "$ABLATE_REPO" --out "$ABLATE_RUNS/shards" --jobs {opts.jobs}\n'
    )


def merge_command(opts: K8sOptions) -> str:
    return (
        "set -eu\n" + _FIND_PLAN + 'run_id=$(basename "$plan")\n'
        'rm -rf "$ABLATE_RUNS/merged"\n'
        f'ablate merge "$ABLATE_RUNS"/shards/"$run_id"-shard-*-of-{opts.shards} --out "$ABLATE_RUNS/merged"\n'
        'if [ -f "$ABLATE_RUNS/probe.json" ]; then cp "$ABLATE_RUNS/probe.json" "$ABLATE_RUNS/merged/"; fi\n'
        'ablate report "$ABLATE_RUNS/merged" --format md,json\n'
        "set +e\n"
        'ablate gate "$ABLATE_RUNS/merged" --summary "$ABLATE_RUNS/merged/gate.md"\n'
        "code=$?\n" + INCONCLUSIVE_SH + 'exit "$code"\n'
    )


def _pod(
    opts: K8sOptions, name: str, command: str, *, key: bool, extra_env: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app.kubernetes.io/name": "ablate", "app.kubernetes.io/component": name}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": name,
                    "image": opts.image,
                    "command": ["/bin/sh", "-c", command],
                    "env": _env(opts, key=key) + extra_env,
                    "volumeMounts": [{"name": "runs", "mountPath": "/runs"}],
                    "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
                }
            ],
            "volumes": [{"name": "runs", "persistentVolumeClaim": {"claimName": opts.volume}}],
        },
    }


def _job(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/name": "ablate", "app.kubernetes.io/version": __version__},
        },
        "spec": spec,
    }


def manifests(opts: K8sOptions) -> dict[str, dict[str, Any]]:
    """File name → Job: ``plan.yaml``, ``shards.yaml`` (the Indexed Job), ``merge.yaml``."""
    check_options(opts)
    plan_env = _values(
        ABLATE_TASKS=opts.tasks,
        ABLATE_CELLS=opts.cells,
        ABLATE_REPEATS=str(opts.repeats),
        ABLATE_MODEL=opts.model,
    )
    # an inconclusive gate (exit 4) fails the Job; set "pass" to let it through
    gate_env = _values(ABLATE_GATE_INCONCLUSIVE="fail")
    return {
        "plan.yaml": _job(
            "ablate-plan",
            {
                "backoffLimit": 0,
                "template": _pod(opts, "plan", plan_command(opts), key=False, extra_env=plan_env),
            },
        ),
        "shards.yaml": _job(
            "ablate-shards",
            {
                "completionMode": "Indexed",
                "completions": opts.shards,
                "parallelism": opts.shards,
                "backoffLimitPerIndex": 2,
                "maxFailedIndexes": opts.shards,
                "template": _pod(opts, "shard", shard_command(opts), key=True, extra_env=[]),
            },
        ),
        "merge.yaml": _job(
            "ablate-merge",
            {
                "backoffLimit": 0,
                "template": _pod(opts, "merge", merge_command(opts), key=False, extra_env=gate_env),
            },
        ),
    }

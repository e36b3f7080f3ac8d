"""``ablate ci init github`` and ``ablate ci init k8s``: thin shells over :mod:`ablate.ci.files`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ablate.cli.common import AblateToml, Cells, Json, cli_errors, print_json
from ablate.core.constants import DEFAULT_MODEL

app = typer.Typer(help="Generated CI files for ablate runs on engines you already run. Exit codes: 0, 2.")
init = typer.Typer(
    help="Write CI files: `ablate ci init github` (a workflow), `ablate ci init k8s` (Jobs).\n\n"
    "Exit codes: 0 written, 2 bad input (an option, an existing file without --force)."
)
app.add_typer(init, name="init")

Force = Annotated[bool, typer.Option("--force", help="Overwrite files that already exist.")]
Shards = Annotated[
    int | None,
    typer.Option(
        "--shards", min=1, help="Shards of the plan, run in parallel (default 2; 1 with --compare)."
    ),
]
Model = Annotated[str, typer.Option("--model", "-m", help="The model every session is pinned to.")]
Repeats = Annotated[
    int | None,
    typer.Option("--repeats", "-n", min=1, help="Repeats per (task, cell); default 3 (5 with --compare)."),
]


def _in_image(flag: str, what: str) -> Any:
    """A k8s option naming a path inside the image (the pods see its files, not this machine's)."""
    return typer.Option(flag, help=f"The {what}'s path in the image.")


@init.command("github")
@cli_errors
def github_cmd(
    shards: Shards = None,
    compare: Annotated[
        str | None,
        typer.Option(
            "--compare",
            help="Compare the pull request's version of this repository file with the base branch's "
            "(ablate compare old=… new=…) instead of an ablation run.",
        ),
    ] = None,
    tasks: Annotated[
        str, typer.Option("--tasks", help="The tasks folder, relative to the repository.")
    ] = "tasks",
    cells: Cells = "layered",
    repeats: Repeats = None,
    model: Model = DEFAULT_MODEL,
    layer: Annotated[
        str, typer.Option("--layer", help="With --compare: the layer the file is (repo-claude-md, …).")
    ] = "user-claude-md",
    config_dir: Annotated[
        str | None,
        typer.Option(
            "--config-dir",
            help="A repository folder copied to the runner's ~/.claude (the user side of the setup).",
        ),
    ] = None,
    require: Annotated[
        list[str] | None, typer.Option("--require", help="Passed to `ablate gate --require` (repeatable).")
    ] = None,
    secret: Annotated[str, typer.Option("--secret", help="The repository secret holding the API key.")] = (
        "ANTHROPIC_API_KEY"
    ),
    install: Annotated[
        str | None,
        typer.Option(
            "--install", help="The pinned pip requirement for ablate (default: ablate-claude==this version)."
        ),
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="The workflow file to write.")] = Path(
        ".github/workflows/ablate.yml"
    ),
    force: Force = False,
    ablate_toml: AblateToml = None,
    json: Json = False,
) -> None:
    """Write a GitHub Actions workflow: on pull requests touching the layer files, probe (free; its failure
    stops the workflow), plan, one matrix job per shard (the pinned CLI on its share; its run folder
    uploaded), then merge, report and gate, with the gate's summary on the pull request.

    The API key comes from a repository secret (--secret) and only the steps that run sessions see it.

    Exit codes: 0 written, 2 bad input (an option, an existing file without --force).
    """
    from ablate.ci.files import write_github
    from ablate.ci.github import GithubOptions

    opts = GithubOptions(
        shards=shards or (1 if compare else 2),
        compare=compare,
        tasks=tasks,
        cells=cells,
        repeats=repeats or (5 if compare else 3),
        model=model,
        layer=layer,
        config_dir=config_dir,
        require=tuple(require or ()),
        secret=secret,
        install=install or GithubOptions.install,
    )
    done = write_github(opts, out, force=force, ablate_toml=ablate_toml)
    if json:
        print_json(done)
        return
    typer.echo(f"{out}: jobs {', '.join(map(str, done['jobs']))}")
    typer.echo(f"  runs on pull requests touching: {', '.join(map(str, done['paths']))}")
    typer.echo(f"  needs the repository secret {secret}")


@init.command("k8s")
@cli_errors
def k8s_cmd(
    shards: Shards = None,
    image: Annotated[
        str | None,
        typer.Option(
            "--image",
            help="A pinned image (TAG or digest) with ablate, Claude Code, the repository and the tasks.",
        ),
    ] = None,
    volume: Annotated[
        str, typer.Option("--volume", help="The PersistentVolumeClaim that holds the run folders.")
    ] = "ablate-runs",
    secret: Annotated[
        str, typer.Option("--secret", help="The Secret with the API key (key: api-key).")
    ] = "ablate-anthropic",
    repo: Annotated[str, _in_image("--repo", "repository")] = "/workspace/repo",
    tasks: Annotated[str, _in_image("--tasks", "tasks folder")] = "/workspace/repo/tasks",
    config_dir: Annotated[str, _in_image("--config-dir", "Claude config dir")] = "/workspace/claude-config",
    cells: Cells = "layered",
    repeats: Repeats = None,
    model: Model = DEFAULT_MODEL,
    out: Annotated[Path, typer.Option("--out", "-o", help="The folder to write the manifests into.")] = Path(
        "k8s/ablate"
    ),
    force: Force = False,
    json: Json = False,
) -> None:
    """Write Kubernetes Jobs: ablate-plan (probe, then plan), ablate-shards (an Indexed Job: the pod of
    index i runs shard i+1 of N from JOB_COMPLETION_INDEX) and ablate-merge (merge, report, gate), with the
    run folders on the volume you name and the API key only as a Secret reference.

    Exit codes: 0 written, 2 bad input (an option, an existing file without --force).
    """
    from ablate.ci.files import write_k8s
    from ablate.ci.k8s import K8sOptions

    opts = K8sOptions(
        shards=shards or 2,
        volume=volume,
        secret=secret,
        repo=repo,
        tasks=tasks,
        config_dir=config_dir,
        cells=cells,
        repeats=repeats or 3,
        model=model,
        image=image or K8sOptions.image,
    )
    done = write_k8s(opts, out, force=force)
    if json:
        print_json(done)
        return
    for f in done["files"]:
        typer.echo(f)
    typer.echo(f"apply in order: kubectl apply -f {out}/plan.yaml, then shards.yaml, then merge.yaml")

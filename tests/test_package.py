"""The package users install: `python -m build` makes an sdist and a wheel that carry the data folders, both
pass `twine check`, and the wheel installed into a fresh venv (offline: no dependencies fetched, the running
venv's site-packages on its path) runs commands outside the repository, a real `ab` run, its report and the
gate included; one version everywhere; the release workflow validates against the GitHub workflow schema
offline."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from ablate import DIST_NAME, PINNED_CLAUDE_VERSION, __version__
from ablate.setup.examples import materialise_example
from ablate.sim import SimServer, script_from_data
from tests.helpers_cli import BIN
from tests.test_ci_files import _validate_workflow

pytestmark = pytest.mark.e2e  # builds the package and runs the pinned CLI's plan outside the repository

REPO = Path(__file__).resolve().parent.parent
DATA = ("cells", "tasks", "shadow", "examples")


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return out


def test_build_makes_an_sdist_and_a_wheel_with_the_data_folders(dist: Path) -> None:
    stem = DIST_NAME.replace("-", "_")
    sdist, wheel = dist / f"{stem}-{__version__}.tar.gz", dist / f"{stem}-{__version__}-py3-none-any.whl"
    with tarfile.open(sdist) as tar:
        top = {Path(n).parts[1] for n in tar.getnames() if len(Path(n).parts) > 1}
    assert {*DATA, "ablate", "CHANGELOG.md", "README.md", "pyproject.toml"} <= top
    assert ".cache" not in top and ".venv" not in top
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta = zf.read(f"{stem}-{__version__}.dist-info/METADATA").decode()
    for name in DATA:
        shipped = sorted(
            p.relative_to(REPO / name).as_posix() for p in (REPO / name).rglob("*") if p.is_file()
        )
        assert (
            sorted(
                n.removeprefix(f"ablate/_data/{name}/")
                for n in names
                if n.startswith(f"ablate/_data/{name}/")
            )
            == shipped
        )
    assert f"Name: {DIST_NAME}\nVersion: {__version__}\n" in meta
    check = subprocess.run(
        [str(BIN / "twine"), "check", "--strict", str(sdist), str(wheel)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_wheel_in_a_fresh_venv_runs_outside_the_repository(
    dist: Path, tmp_path: Path, claude: Path
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (wheel,) = dist.glob("*.whl")
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q"]
    subprocess.run([*pip, "--no-deps", "--no-index", str(wheel)], check=True, timeout=300)
    # the dependencies come from the running venv (no network): its site-packages as a plain path entry, which
    # neither imports this worktree (an editable install's hook runs only from a site dir) nor shadows the wheel
    purelib = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(purelib, "_running_venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    work = tmp_path / "elsewhere"
    work.mkdir()

    def ablate(*args: str, env: dict[str, str] | None = None, codes: tuple[int, ...] = (0,)) -> str:
        proc = subprocess.run(
            [str(venv / "bin" / "ablate"), *args], cwd=work, capture_output=True, text=True, timeout=300,
            env={"PATH": "/usr/bin:/bin", "HOME": str(ex.home), **(env or {})},
        )  # fmt: skip
        assert proc.returncode in codes, proc.stdout + proc.stderr
        return proc.stdout

    ex = materialise_example(tmp_path / "ex")
    assert ablate("--version").strip() == f"ablate {__version__} (Claude Code {PINNED_CLAUDE_VERSION} pinned)"
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import ablate.core.resources as r; print(r.__file__, r.data_dir('tasks'))"],
        cwd=work, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert where.startswith(str(venv)) and "/ablate/_data/tasks" in where and str(REPO) not in where
    assert "C11" in ablate("cells", "binary")
    assert "leaks: none found" in ablate("layers", "--config-dir", str(ex.config_dir), "--repo", str(ex.repo))
    shipped_tasks = where.split()[1]
    planned = ablate(
        "plan", "--tasks", shipped_tasks, "--cells", "binary", "--config-dir", str(ex.config_dir), "--repo",
        str(ex.repo), "--out", str(work / "runs"), "--claude-bin", str(claude),
    )  # fmt: skip
    assert "items in" in planned
    # the paid path, for free and from the wheel alone: an `ab` run of a shipped task through the pinned CLI
    # against ablate.sim, its report, and the gate's decision on it
    setup = ["--config-dir", str(ex.config_dir), "--repo", str(ex.repo), "--claude-bin", str(claude)]
    with SimServer(script_from_data({"default": {"text": "OK"}})) as sim:
        ablate(
            "ab", "--tasks", f"{shipped_tasks}/greet-exclaim.toml", "--repeats", "1", "--max-turns", "2",
            "--no-probe", "--report", "none", "--out", str(work / "ab"), *setup,
            env={"ANTHROPIC_BASE_URL": sim.base_url, "ANTHROPIC_API_KEY": "sk-test"},
        )  # fmt: skip
    (run_dir,) = (work / "ab").iterdir()
    assert "rank" in ablate("report", str(run_dir), "--format", "md,json")
    assert (run_dir / "report.md").is_file()
    decided = ablate("gate", str(run_dir), codes=(0, 1, 4))  # one repeat: whatever it decides, it says so
    assert any(word in decided for word in ("PASS", "FAIL", "INCONCLUSIVE")), decided
    assert ablate(
        "tasks",
        "suggest",
        "--config-dir",
        str(ex.config_dir),
        "--repo",
        str(ex.repo),
        "--out",
        str(work / "d"),
    )


def test_one_version_and_the_release_workflow(tmp_path: Path) -> None:
    pyproject = (REPO / "pyproject.toml").read_text()
    assert f'name = "{DIST_NAME}"' in pyproject and 'dynamic = ["version"]' in pyproject
    assert 'path = "ablate/__init__.py"' in pyproject
    assert f"## {__version__}" in (REPO / "CHANGELOG.md").read_text()
    release = REPO / ".github" / "workflows" / "release.yml"
    _validate_workflow(release)
    data = yaml.safe_load(release.read_text())
    assert data[True] == {"push": {"tags": ["v*"]}}  # YAML 1.1 reads the `on` key as True
    publish = data["jobs"]["publish"]
    assert publish["permissions"] == {"id-token": "write"}  # trusted publishing: no token secret
    assert publish["steps"][-1]["uses"].startswith("pypa/gh-action-pypi-publish@")
    build_steps = " ".join(str(s.get("run", "")) for s in data["jobs"]["build"]["steps"])
    assert "python -m build" in build_steps and "twine check" in build_steps
    assert "secrets." not in release.read_text()

"""Start-up cost: importing the command line loads no heavy library and no stage it does not need.

Every ``ablate`` command pays for what ``ablate.cli.main`` imports, ``ablate --help`` and ``ablate mine``
included, so the stages (run, report, isolate, …) and the libraries behind them (pydantic models, psutil,
matplotlib, scipy, anthropic) are imported inside the commands that use them. Checked in a fresh interpreter:
this test process has already imported everything.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

from ablate.folder.session import SESSION_SCHEMA_VERSION
from ablate.isolate.procenv import allowed
from ablate.mine.model import SCHEMA_VERSION

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "data" / "fixtures"

#: Measured at import time before they were moved into the commands: the run stage alone (through the run
#: display) pulled in isolate, setup, folder, mine, pydantic and psutil, about 0.25 s of every command.
HEAVY_LIBRARIES = ("matplotlib", "scipy", "numpy", "anthropic", "pydantic", "psutil", "git", "tabulate")
STAGES = ("setup", "isolate", "probe", "run", "mine", "grade", "stats", "report", "compare", "sim", "folder")


def _loaded_after(code: str) -> set[str]:
    """The modules loaded by ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport sys, orjson\nsys.stdout.buffer.write(orjson.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, check=True, cwd=REPO)
    return set(orjson.loads(out.stdout.splitlines()[-1]))


def _offenders(loaded: set[str], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if m.split(".")[0] in forbidden)


def _stages(loaded: set[str], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if m.startswith("ablate.") and m.split(".")[1] in forbidden)


def test_importing_the_command_line_loads_no_heavy_library_and_no_stage() -> None:
    loaded = _loaded_after("import ablate.cli.main\nablate.cli.main.add_groups()")
    assert "ablate.cli.run" in loaded and "typer" in loaded  # the probe saw the real import
    assert _offenders(loaded, HEAVY_LIBRARIES) == []
    assert _stages(loaded, STAGES) == []


def test_mining_loads_no_pydantic_backed_stage() -> None:
    """``ablate mine FILE --json``: the miner and nothing upstream of it, pydantic included (~0.1 s of a start:
    typer is held below 0.29, which builds a pydantic adapter for every option it parses)."""
    fixture = FIXTURES / "plain.jsonl"
    code = (
        "import contextlib, io\n"
        "from ablate.cli.main import add_groups\n"
        f"argv = ['mine', {str(fixture)!r}, '--json', '--jobs', '1']\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    add_groups(argv)(argv, standalone_mode=False)\n"
        'assert \'"status":"completed"\' in out.getvalue(), out.getvalue()\n'
    )
    loaded = _loaded_after(code)
    assert "ablate.mine.derive" in loaded
    # only the command's own group is imported (main imports the group the command names)
    assert sorted(m for m in loaded if m.startswith("ablate.cli.")) == [
        "ablate.cli.common",
        "ablate.cli.main",
        "ablate.cli.mine",
    ]
    folder_names = {"ablate.folder", "ablate.folder.names"}  # the run folder's file names: no models
    assert [
        m for m in _stages(loaded, tuple(s for s in STAGES if s != "mine")) if m not in folder_names
    ] == []
    assert _offenders(loaded, HEAVY_LIBRARIES) == []


def test_the_report_types_load_no_statistics_until_a_report_is_built() -> None:
    """``compare`` reads the report's types from its first line; a refusal or a resume with nothing left to run
    must not pay for scipy (~1.5 CPU-s), which the report's sections load when ``build_report`` is asked for."""
    loaded = _loaded_after("import ablate.report.model, ablate.compare.core, ablate.cli.compare")
    assert _offenders(loaded, ("scipy", "numpy", "matplotlib")) == []
    assert "ablate.report.sections" not in loaded
    built = _loaded_after("from ablate.report.sections import build_report")
    assert "ablate.report.sections" in built and "scipy" in built


def test_the_miner_writes_the_session_schema_version_of_the_typed_model() -> None:
    assert SCHEMA_VERSION == SESSION_SCHEMA_VERSION


def test_the_group_table_names_every_command_of_every_group() -> None:
    """``GROUPS`` (what ``main`` imports for a command) holds each module's own commands, and a command
    named on the command line brings in its group and no other."""
    import importlib

    import typer

    from ablate.cli.main import GROUPS, add_groups

    for module, name, commands in GROUPS:
        group = importlib.import_module(f"ablate.cli.{module}").app
        names = tuple(
            c.name or typer.main.get_command_name(getattr(c.callback, "__name__", ""))
            for c in group.registered_commands
        )
        assert names == commands or (name is not None and not commands), (module, names)
    everything = typer.main.get_command(add_groups())
    top = set(everything.commands)  # type: ignore[attr-defined]
    assert top == {n for _, name, cmds in GROUPS for n in ((name,) if name else cmds)}


def test_gating_a_fresh_report_of_one_model_loads_no_statistics(tmp_path: Path) -> None:
    """``ablate gate RUN`` reads report.json: the statistics (scipy, ~1 CPU-s of a 1.4 s gate, measured) are
    loaded only for a report it must rebuild (stale, or none) or a model part it must narrow to."""
    from ablate.report import write_report
    from tests.report_support import Outcome, make_run

    run = make_run(tmp_path / "run", cells={"C0": [], "C1": ["user-claude-md"]}, tasks=["greet"], repeats=2,
                   outcome=lambda task, cell, repeat: Outcome(pitfall=cell == "C1"))  # fmt: skip
    write_report(run, formats=["json"])
    code = (
        "import contextlib, io\n"
        "from ablate.cli.main import add_groups\n"
        f"argv = ['gate', {str(run)!r}, '--detect', 'off']\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):\n"
        "    add_groups(argv)(argv)\n"
        "assert out.getvalue().startswith(('PASS', 'FAIL')), out.getvalue()\n"
        "assert 'rebuilt' not in out.getvalue(), out.getvalue()\n"
    )
    assert _offenders(_loaded_after(code), ("scipy", "matplotlib")) == []
    (run / "report.json").write_bytes(
        (run / "report.json").read_bytes().replace(b'"inputs_sha256"', b'"x"', 1)
    )
    assert "scipy" in _loaded_after(code.replace("assert 'rebuilt' not in", "assert 'rebuilt' in"))


def test_the_command_line_loads_blas_with_one_thread_and_keeps_a_users_choice() -> None:
    """numpy's OpenBLAS, loaded by a command after it started, runs no thread of its own (a thread per core
    otherwise); a user's ``OPENBLAS_NUM_THREADS`` is left as it is, and sessions never inherit it."""
    code = (
        "import os, sys\nsys.argv = ['ablate', '--version']\nfrom ablate.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\nimport numpy\n"
        "print(os.environ.get('OPENBLAS_NUM_THREADS'), len(os.listdir('/proc/self/task')))"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    for given, said in ((None, "1 1"), ("3", "3")):
        run_env = env if given is None else {**env, "OPENBLAS_NUM_THREADS": given}
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=run_env
        )
        assert out.stdout.splitlines()[-1].startswith(said), out.stdout + out.stderr
    assert not allowed("OPENBLAS_NUM_THREADS")

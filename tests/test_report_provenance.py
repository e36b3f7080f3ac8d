"""The report's "your own history" section: built from the manifest's config dir when it has history of the
run's repository (a transcript the real CLI wrote), absent otherwise, and never part of the figures."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson

from ablate.core.slug import slug
from ablate.folder.layout import RunFolder, read_manifest, write_manifest
from ablate.report import write_report
from ablate.report.provenance import HEADING
from tests.conftest import DATA
from tests.report_support import LAYERS, Outcome, make_run

#: The cwd every line of the fixture transcript (a session that invokes a skill) records.
REPO = "/srv/fx/skill/demo-app"


def _run(tmp: Path, config_dir: Path | None) -> Path:
    run = make_run(
        tmp / "run", cells={"C0": [], "C4": ["skills"]}, tasks=["greet"], repeats=3,
        outcome=lambda *_: Outcome(), layers=[*LAYERS, "skills"],
    )  # fmt: skip
    folder = RunFolder(run)
    manifest = read_manifest(folder)
    setup = manifest.setup.model_copy(
        update={"config_dir": None if config_dir is None else str(config_dir), "repo": REPO}
    )
    write_manifest(folder, manifest.model_copy(update={"setup": setup}))
    return run


def test_the_report_cites_the_users_own_history_in_its_own_section(tmp_path: Path) -> None:
    config = tmp_path / "config"
    project = config / "projects" / slug(REPO)
    project.mkdir(parents=True)
    shutil.copy(DATA / "fixtures" / "skill.jsonl", project / "5ed0bdf0-0264-4c7f-81be-30e22df59697.jsonl")
    run = _run(tmp_path, config)
    written = write_report(run)
    prov = written.report.provenance
    assert prov is not None and prov.heading == HEADING and prov.sessions == 1
    assert [ln.layer for ln in prov.lines] == ["skills"]
    # the fixture's repository is not on this machine, so no skill of it is on disk to be loaded or used
    assert prov.lines[0].sentence == "skills: used in 0% of your last 1 sessions (0 of 1), loaded in 0."
    data = orjson.loads(written.paths["json"].read_bytes())
    assert data["provenance"]["sessions"] == 1 and data["provenance"]["lines"][0]["used_sessions"] == 0
    md = written.paths["md"].read_text()
    section = md.split(f"## {HEADING}\n", 1)[1].split("\n## ", 1)[0]
    assert "- skills: used in 0% of your last 1 sessions (0 of 1), loaded in 0." in section
    assert "not part of the measured effects" in section
    # its own heading, after the figures: no comparison, ranking or caveat mentions the history
    assert md.index(f"## {HEADING}") > md.index("## Marginal contribution")
    assert HEADING in written.paths["html"].read_text()
    assert "your last" not in orjson.dumps(data["comparisons"] + data["ranking"] + data["caveats"]).decode()


def test_no_history_on_this_machine_means_no_section(tmp_path: Path) -> None:
    for config in (None, tmp_path / "missing", tmp_path / "empty"):
        if config is not None and config.name == "empty":
            (config / "projects").mkdir(parents=True)
        run = _run(tmp_path / (config.name if config else "none"), config)
        written = write_report(run, formats=["json", "md"])
        assert written.report.provenance is None
        assert "provenance" not in orjson.loads(written.paths["json"].read_bytes())
        assert HEADING not in written.paths["md"].read_text()

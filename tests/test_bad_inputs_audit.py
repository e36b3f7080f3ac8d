"""Bad inputs a hostile-input audit found handled badly: each is now a located error with exit code 2."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ablate.core.errors import EXIT_USAGE, SpecError, UsageError
from ablate.isolate.procenv import one_endpoint
from ablate.setup.taskset import load_tasks
from tests.helpers_cli import invoke
from tests.test_recover import build_run_dir


@pytest.mark.timeout(20)
def test_a_fifo_given_as_a_task_file_is_refused_by_name_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "task.toml"
    os.mkfifo(fifo)  # reading it would block until a writer came: the refusal must not open it
    with pytest.raises(SpecError) as err:
        load_tasks([fifo])
    assert err.value.exit_code == EXIT_USAGE
    assert str(fifo) in str(err.value) and "not a regular file" in str(err.value)


def test_an_integer_in_settings_env_names_the_file_the_key_and_the_fix(tmp_path: Path) -> None:
    config, repo = tmp_path / "config", tmp_path / "repo"
    config.mkdir()
    repo.mkdir()
    (config / "settings.json").write_text('{"env": {"MAX_THINKING_TOKENS": 1024}}', encoding="utf-8")
    with pytest.raises(UsageError) as err:
        one_endpoint(config, repo, {})
    said = str(err.value)
    assert err.value.exit_code == EXIT_USAGE
    assert f"{config / 'settings.json'}: env.MAX_THINKING_TOKENS is 1024, not a string" in said
    assert '"MAX_THINKING_TOKENS": "1024"' in said  # the fix
    (config / "settings.json").write_text('{"env": {"MAX_THINKING_TOKENS": "1024"}}', encoding="utf-8")
    one_endpoint(config, repo, {})  # quoted, it is accepted


def test_recover_on_a_garbage_manifest_is_bad_input_and_writes_nothing(tmp_path: Path) -> None:
    root = build_run_dir(tmp_path)
    (root / "manifest.json").write_bytes(b"\x00garbage{")
    res = invoke(["recover", str(root)])
    assert res.exit_code == EXIT_USAGE, res.output
    assert "manifest.json" in res.stderr and "invalid JSON" in res.stderr
    assert not (root / "results").exists()


def test_doctor_on_a_missing_work_dir_says_it_is_missing(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder"
    res = invoke(["doctor", "--work-dir", str(missing)])
    assert res.exit_code == EXIT_USAGE, res.output
    assert f"--work-dir {missing}: no such folder" in res.stderr
    assert not missing.exists()

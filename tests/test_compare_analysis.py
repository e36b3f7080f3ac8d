"""The verdict and decomposition logic of `ablate compare` on hand-made outcomes (no endpoint, no CLI)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from ablate.compare import analysis as an
from ablate.compare.core import CompareRequest, prepare_compare, run_compare
from ablate.compare.executors import Execution, ItemOutcome, WorkItem, layer_fingerprint
from ablate.compare.model import VerdictRow
from ablate.compare.tiers import claims, resolve_tier
from ablate.core.errors import UsageError
from ablate.setup.layers import default_catalog_path, load_catalog, resolve_layer
from ablate.stats.power import power_binary


def observations(rates: dict[tuple[str, str], int], repeats: int = 30) -> list[an.Observation]:
    """``rates[(task, arm)]`` = how many of the ``repeats`` blocks are pitfall-free (the first ones)."""
    return [
        an.Observation(task, arm, r, r < k, None) for (task, arm), k in rates.items() for r in range(repeats)
    ]


TASKS = ["t1", "t2", "t3", "h1"]


def verdict(rates: dict[tuple[str, str], int], holdout: list[str]) -> VerdictRow:
    obs = observations(rates)
    contrasts = an.all_contrasts(obs, ["old", "new"], TASKS)
    v, _ = an.verdict(obs, contrasts, "old", "new", TASKS, holdout)
    return v


def test_better_needs_a_real_gain_no_regression_and_holdout_agreement() -> None:
    rates = {(t, "old"): 10 for t in TASKS} | {(t, "new"): 25 for t in TASKS}
    v = verdict(rates, ["h1"])
    assert v.better and v.failed == []
    assert v.line.startswith("new is better than old")


def test_a_significant_task_regression_blocks_better_even_with_a_pooled_gain() -> None:
    rates = {(t, "old"): 5 for t in TASKS} | {(t, "new"): 30 for t in TASKS}
    rates[("t2", "old")], rates[("t2", "new")] = 30, 0
    v = verdict(rates, ["h1"])
    assert not v.better
    assert v.failed == ["nothing regressed"]
    assert "t2 -100.0 pts" in v.line


def test_holdout_that_does_not_agree_or_is_missing_blocks_better() -> None:
    rates = {(t, "old"): 10 for t in TASKS} | {(t, "new"): 28 for t in TASKS}
    rates[("h1", "new")] = 8
    v = verdict(rates, ["h1"])
    assert v.failed == ["holdout agrees"] and "not a gain" in v.line
    v = verdict(rates, [])
    assert v.failed == ["holdout agrees"] and "no holdout tasks" in v.line


def test_no_discordant_blocks_is_a_draw_with_the_reason() -> None:
    obs = observations({("t1", "a"): 12, ("t1", "b"): 12})
    (c,) = an.all_contrasts(obs, ["a", "b"], ["t1"])
    assert (c.delta, c.p, c.real) == (0.0, None, False)
    assert any("no discordant blocks" in n for n in c.notes)


def test_one_task_has_no_duplicate_contrasts_and_real_is_at_most_alpha() -> None:
    # one task: the per-task contrast would be a copy of the pooled one, counted twice by Holm
    obs = observations({("t1", "a"): 0, ("t1", "b"): 6}, repeats=6)
    contrasts = an.all_contrasts(obs, ["a", "b"], ["t1"])
    assert [(c.metric, c.task) for c in contrasts] == [("pitfall_free", None)]
    # 6 of 6 blocks discordant one way: exact p = 2 / 64 = 0.03125; Holm over one contrast; real at alpha
    an.apply_holm(contrasts, alpha=0.03125)
    assert contrasts[0].p_adjusted == pytest.approx(0.03125) and contrasts[0].real


def test_decomposition_orients_every_effect_whatever_the_arm_order() -> None:
    obs = observations({("t1", "dup"): 27, ("t1", "orig"): 9, ("t1", "moved"): 18})
    contrasts = an.all_contrasts(obs, ["dup", "orig", "moved"], ["t1"])
    parts = an.decomposition(contrasts, "orig", "moved", "dup")
    assert round(parts["position"].delta or 0, 6) == 0.3
    assert round(parts["repetition"].delta or 0, 6) == 0.3
    assert round(parts["total"].delta or 0, 6) == 0.6
    for e in parts.values():
        assert e.ci_low is not None and e.ci_high is not None and e.ci_low < (e.delta or 0) < e.ci_high


class EditingExecutor:
    """Answers every item pitfall-free and edits an arm's source file halfway through the run."""

    name = "fake"
    spends = False
    spend_basis = "nothing: a test double"
    simulated = True

    def __init__(self, victim: Path) -> None:
        self.victim = victim
        self.seen: list[bytes] = []

    def calls_per_session(self, max_turns: int) -> int:
        return 1

    def run(
        self,
        items: Sequence[WorkItem],
        folder: Path,
        on_item: Callable[[ItemOutcome], None] | None = None,
    ) -> Execution:
        out = []
        for n, it in enumerate(items):
            if n == len(items) // 2:
                self.victim.write_text("edited while the run was going\n")
            self.seen.append(it.arm.rendered.data)
            out.append(ItemOutcome(it.item, it.task.id, it.arm.name, it.repeat, it.order, "completed"))
        return Execution(out)


def test_a_file_edited_during_the_run_is_reported_and_every_session_got_the_first_bytes(
    tmp_path: Path,
) -> None:
    a, b = tmp_path / "a.md", tmp_path / "b.md"
    a.write_text("version a\n")
    b.write_text("version b\n")
    tasks = tmp_path / "t.toml"
    tasks.write_text('schema_version = 1\nid = "t"\nprompt = "p"\n')
    ex = EditingExecutor(b)
    req = CompareRequest(arms=[str(a), str(b)], tasks=[tasks], executor="fake", out=tmp_path / "runs")
    prep = prepare_compare(req, ex)
    folder, doc = run_compare(prep, ex)
    assert set(ex.seen) == {b"version a\n", b"version b\n"}
    (change,) = doc.fingerprint_changes
    assert change.arm == "b" and change.when.startswith("during this run")
    assert (folder / "arms" / "b.md").read_bytes() == b"version b\n"
    assert "WARNING: b" in (folder / "compare.md").read_text()


def test_tier_floor_and_what_each_tier_claims() -> None:
    assert resolve_tier("rigorous", None).repeats == 30
    assert resolve_tier("rigorous", 40).repeats == 40
    with pytest.raises(UsageError, match="--repeats 29: the rigorous tier needs at least 30"):
        resolve_tier("rigorous", 29)
    with pytest.raises(UsageError, match="--repeats 4: the smoke tier needs at least 5"):
        resolve_tier("smoke", 4)
    small = claims(resolve_tier("smoke", None), blocks=15, contrasts=4, p_control=0.6)
    assert any("too few for the exact test at 0.05/4" in c for c in small["cannot"])
    assert any("not evidence of no effect" in c for c in small["cannot"])
    big = claims(resolve_tier("rigorous", None), blocks=120, contrasts=12, p_control=0.3)
    (detect,) = [c for c in big["can"] if c.startswith("detect")]
    assert "from the baseline's 30%" in detect and "120 paired" in detect
    assert any(c.startswith("rule out effects smaller than about") for c in big["cannot"])


def test_arm_fingerprint_in_layer_form_matches_the_catalogs_fingerprint_of_a_cell(tmp_path: Path) -> None:
    data = b"# Rules\n\nRULE-UV once.\n"
    (tmp_path / "CLAUDE.md").write_bytes(data)
    catalog = load_catalog(None, base=default_catalog_path())
    lf = resolve_layer(catalog.get("user-claude-md"), tmp_path, memory_slug="-x")
    assert lf.fingerprint == layer_fingerprint("CLAUDE.md", data)
    assert layer_fingerprint("CLAUDE.md", data + b"x") != lf.fingerprint


def _simulated(seed: int, p_a: float, p_b: float) -> list[an.Observation]:
    rng = random.Random(seed)
    return [
        an.Observation(t, arm, r, rng.random() < p, None)
        for t in TASKS
        for r in range(30)
        for arm, p in (("a", p_a), ("b", p_b))
    ]


def test_by_simulation_null_marks_stay_under_five_percent_and_a_planted_effect_is_found() -> None:
    seeds = range(150)
    false_marks = sum(
        any(c.real for c in an.all_contrasts(_simulated(s, 0.3, 0.3), ["a", "b"], TASKS, seed=s))
        for s in seeds
    )
    assert false_marks / len(seeds) <= 0.05
    found = 0
    for s in seeds:
        cs = an.all_contrasts(_simulated(s, 0.3, 0.5), ["a", "b"], TASKS, seed=s)
        pooled = an.find(cs, "a", "b", "pitfall_free", None)
        found += pooled is not None and pooled.real and (pooled.delta or 0) > 0
    # Holm tests the smallest of the 5 pitfall-free p-values at alpha/5: the exact power predicts the rate
    predicted = power_binary(len(TASKS) * 30, 0.3, 0.5, 0.05 / 5)
    assert abs(found / len(seeds) - predicted) <= 0.1, (found / len(seeds), predicted)

"""The blind judge: grades an item's final answer against the task's rubric through the official SDK (README.md's
``ablate judge``). A rate limit pauses the pool with :mod:`ablate.core.backoff`, the SDK's own retries off; the
endpoint comes from the usual variables, so ``ablate.sim`` can play the judge."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import orjson

from ablate.core.backoff import Backoff, BackoffPolicy
from ablate.core.errors import RunFolderError, UsageError
from ablate.core.pricing import estimate_cost, normalize_model, price_for
from ablate.folder.layout import TASKS_DIR, RunFolder, RunManifest, read_manifest
from ablate.folder.result import ItemResult, iter_results
from ablate.grade.record import JudgeVerdict, grades_lock, read_grade, record_verdict
from ablate.setup.tasks import Rubric, Task, load_task

#: Longest answer / diff sent to the judge (characters); longer ones are cut in the middle, and say so.
MAX_ANSWER_CHARS = 40_000
MAX_DIFF_CHARS = 40_000

SYSTEM = (
    "You grade one answer given by an AI coding assistant to a task, against a rubric. You see only the task, "
    "the rubric, the assistant's final answer and, when given, the diff of the files it changed. Decide "
    "whether the answer meets the PASS description; anything that matches the FAIL description, or does not "
    "clearly meet PASS, fails. Reply with exactly one JSON object and nothing else: "
    '{"verdict": "pass" or "fail", "reason": "one sentence"}'
)
RETRY = (
    'That was not a valid verdict. Reply with exactly one JSON object: {"verdict": "pass" or "fail", '
    '"reason": "one sentence"}'
)


# ----------------------------------------------------------------------------------------------------------
# What the judge sees


@dataclass(frozen=True)
class JudgeInput:
    """Everything the judge is shown, and nothing more."""

    prompt: str
    rubric: Rubric
    answer: str
    diff: str | None = None


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters cut ...]\n{text[-half:]}"


def render_request(inp: JudgeInput) -> str:
    """The user message of a judge call."""
    parts = [
        f"<task>\n{inp.prompt}\n</task>",
        f"<rubric>\nPASS: {inp.rubric.pass_}\nFAIL: {inp.rubric.fail}\n</rubric>",
        f"<answer>\n{_cut(inp.answer, MAX_ANSWER_CHARS)}\n</answer>",
    ]
    if inp.diff is not None:
        parts.append(f"<diff>\n{_cut(inp.diff, MAX_DIFF_CHARS) or '(no files changed)'}\n</diff>")
    return "\n\n".join(parts)


_GENERIC = re.compile(r"(/[^\s'\"`]*?ablate-envs)(/[^\s'\"`]*)?")


def scrub(text: str, paths: Iterable[str]) -> str:
    """Replace every given absolute path (longest first, and its resolved form) by ``<checkout>`` (the first,
    the session's cwd) or ``<path>`` (the others, and any path through an ``ablate-envs`` folder)."""
    seen: list[tuple[str, str]] = []
    for i, p in enumerate(paths):
        if not p or not p.startswith("/") or p == "/":
            continue
        label = "<checkout>" if i == 0 else "<path>"
        for form in {p.rstrip("/"), os.path.realpath(p).rstrip("/")}:
            if form and form != "/" and all(form != s for s, _ in seen):
                seen.append((form, label))
    for form, label in sorted(seen, key=lambda s: -len(s[0])):
        text = text.replace(form, label)
    return _GENERIC.sub("<path>", text)


def cell_paths(folder: RunFolder, manifest: RunManifest, result: ItemResult) -> list[str]:
    """Absolute paths that would identify the cell or the setup: the session's cwd first."""
    cwd = result.session.cwd if result.session is not None else None
    paths = [cwd or ""]
    cell_env = next((c.env for c in manifest.cells if c.id == result.cell), {})
    paths += [v for key in ("HOME", "CLAUDE_CONFIG_DIR", "TMPDIR", "PWD") if (v := cell_env.get(key))]
    if cwd and Path(cwd).parent.name == "wt":
        paths.append(str(Path(cwd).parent.parent))  # the environment's root (home, config dir, checkout)
    paths.extend(p for p in (manifest.setup.config_dir, manifest.setup.repo) if p)
    paths.append(str(folder.root.resolve()))
    return paths


def final_answer(folder: RunFolder, result: ItemResult) -> str | None:
    """The session's final text: the CLI's ``result`` field, else the transcript's last assistant text."""
    from ablate.grade.trace import read_trace

    stdout = folder.root / result.stdout if result.stdout else None
    transcript = folder.root / result.transcript if result.transcript else None
    return read_trace(stdout, transcript, result.session_id).last_message


# ----------------------------------------------------------------------------------------------------------
# One verdict


class RateLimited(Exception):
    """The judge endpoint rate-limited the call (429, 529) or could not be reached: pause and try again."""

    def __init__(self, message: str, retry_after_s: float | None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class MessagesClient(Protocol):
    """What the judge needs of ``anthropic.Anthropic``: ``client.messages.create(...)``."""

    @property
    def messages(self) -> Any: ...


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


def parse_verdict(text: str) -> tuple[Literal["pass", "fail"], str] | None:
    """``(verdict, reason)`` from the judge's reply, or None when it is not one well-formed JSON verdict."""
    body = _FENCE.sub("", text.strip()).strip()
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or set(obj) - {"verdict", "reason"}:
        return None
    verdict, reason = obj.get("verdict"), obj.get("reason")
    if verdict not in ("pass", "fail") or not isinstance(reason, str) or not reason.strip():
        return None
    return verdict, reason.strip()


def _retry_after(exc: Any) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def judge_once(
    client: MessagesClient, model: str, inp: JudgeInput, *, attempt: int, max_tokens: int = 400
) -> JudgeVerdict:
    """Ask ``model`` for one verdict (a malformed reply is asked for once more). Raises :class:`RateLimited`."""
    import anthropic

    messages: list[dict[str, Any]] = [{"role": "user", "content": render_request(inp)}]
    tries, tokens_in, tokens_out = 0, 0, 0

    def done(verdict: Literal["pass", "fail", "error"], reason: str) -> JudgeVerdict:
        cost = estimate_cost(model, input_tokens=tokens_in, output_tokens=tokens_out) if tries else 0.0
        return JudgeVerdict(
            judge_model=model,
            attempt=attempt,
            verdict=verdict,
            reason=reason,
            tries=tries,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            cost_usd=cost,
        )

    for _ in range(2):
        tries += 1
        try:
            msg = client.messages.create(model=model, max_tokens=max_tokens, system=SYSTEM, messages=messages)
        except anthropic.RateLimitError as exc:
            raise RateLimited(f"429: {exc.message}", _retry_after(exc)) from exc
        except anthropic.APIStatusError as exc:
            if exc.status_code == 529:
                raise RateLimited(f"529: {exc.message}", _retry_after(exc)) from exc
            return done("error", f"API error {exc.status_code}: {exc.message}"[:300])
        except anthropic.APIConnectionError as exc:  # also a timeout: transient, like a rate limit
            raise RateLimited(f"endpoint not reached: {exc}", None) from exc
        except anthropic.APIError as exc:
            return done("error", f"API error: {exc}"[:300])
        usage = getattr(msg, "usage", None)
        tokens_in += int(getattr(usage, "input_tokens", 0) or 0)
        tokens_out += int(getattr(usage, "output_tokens", 0) or 0)
        text = "".join(getattr(b, "text", "") for b in msg.content if getattr(b, "type", "") == "text")
        if msg.stop_reason == "refusal":
            return done("error", f"the judge refused: {text.strip()[:200]}")
        parsed = parse_verdict(text)
        if parsed is not None:
            return done(parsed[0], parsed[1])
        messages = [
            *messages,
            {"role": "assistant", "content": text or "(empty)"},
            {"role": "user", "content": RETRY},
        ]
    return done("error", f"malformed verdict twice (last reply: {text.strip()[:200]!r})")


# ----------------------------------------------------------------------------------------------------------
# Judging a run folder


@dataclass(frozen=True)
class JudgeOptions:
    """How ``ablate judge`` (and ``ablate run --judge-model``) work through a folder."""

    judge_models: tuple[str, ...]
    """Judge models; each grades every item once."""
    allow_same_judge: bool = False
    jobs: int = 4
    budget_usd: float | None = None
    """Stop launching once the folder's recorded judge spend reaches this."""
    split: Literal["dev", "holdout", "both"] = "both"
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    """Pauses after a rate limit and when to give up: the runner's policy."""


@dataclass
class JudgeSummary:
    """What a judge invocation did."""

    folder: Path
    outcome: Literal["finished", "budget", "rate-limited", "interrupted"] = "finished"
    judged: int = 0
    """New verdicts (pass, fail or error) recorded now."""
    skipped: int = 0
    """(item, judge) pairs already judged (idempotent resume)."""
    errors: int = 0
    """Verdicts recorded as judge errors now (judged again by the next invocation)."""
    not_judgeable: int = 0
    """Complete items whose task has no rubric (or whose final answer is missing)."""
    pending: int = 0
    """Pairs left for a later invocation (budget, rate limit, interruption)."""
    rate_limited: int = 0
    """Calls rate-limited, or whose connection failed (paused and asked again, never verdicts)."""
    spend_usd: float = 0.0
    """Recorded judge spend of the whole folder (estimated from the price table)."""
    by_judge: dict[str, dict[str, int]] = field(default_factory=dict)
    """pass / fail / error counts per judge over the folder (every recorded verdict of a current attempt)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"folder": str(self.folder), "spend_usd": round(self.spend_usd, 6)}


def check_judges(model_under_test: str | Sequence[str], judges: Sequence[str], *, allow_same: bool) -> None:
    """Refuse a judge that is a model under test (unless allowed) and duplicate judges."""
    tested = [model_under_test] if isinstance(model_under_test, str) else model_under_test
    if not judges:
        raise UsageError("no judge model given", hint="pass --judge-model M or --judge-models A,B")
    if len(set(judges)) != len(judges):
        raise UsageError(f"a judge is listed twice: {', '.join(judges)}")
    for j in judges:
        if not allow_same and normalize_model(j) in map(normalize_model, tested):
            raise UsageError(
                f"judge model {j} is the model under test: it would grade its own answers",
                hint="pick another --judge-model, or pass --allow-same-judge to accept the bias",
            )


def make_client() -> MessagesClient:
    """The SDK client from the usual variables; no SDK retries (ablate owns the backoff)."""
    import anthropic

    if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
        raise UsageError(
            "the judge needs an API key: ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) is not set",
            hint="export ANTHROPIC_API_KEY=...; ANTHROPIC_BASE_URL selects another endpoint",
        )
    client: MessagesClient = anthropic.Anthropic(max_retries=0, timeout=300.0)
    return client


def load_run_tasks(folder: RunFolder, manifest: RunManifest) -> dict[str, Task]:
    """The task copies stored in the run folder (``tasks/<id>.toml``)."""
    out: dict[str, Task] = {}
    for mt in manifest.tasks:
        path = folder.root / TASKS_DIR / f"{mt.id}.toml"
        if path.exists():
            out[mt.id] = load_task(path)
    return out


def judge_input(
    folder: RunFolder, manifest: RunManifest, task: Task, result: ItemResult
) -> JudgeInput | None:
    """The blinded input for one item, or None when it cannot be judged (no rubric, no final answer)."""
    if task.spec.rubric is None:
        return None
    answer = final_answer(folder, result)
    if answer is None:
        return None
    paths = cell_paths(folder, manifest, result)
    diff: str | None = None
    if task.spec.checks:
        grade = read_grade(folder, result.item)
        checks = grade.checks_for(result.attempt) if grade else None
        if checks is not None and checks.diff and (folder.root / checks.diff).is_file():
            diff = scrub((folder.root / checks.diff).read_text(encoding="utf-8", errors="replace"), paths)
        else:
            diff = "(the diff of this session was not saved)"
    return JudgeInput(prompt=task.prompt, rubric=task.spec.rubric, answer=scrub(answer, paths), diff=diff)


@dataclass
class _Unit:
    result: ItemResult
    judge: str
    inp: JudgeInput


def judge_folder(
    run_dir: Path,
    options: JudgeOptions,
    *,
    client: MessagesClient | None = None,
    stop: threading.Event | None = None,
    on_progress: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> JudgeSummary:
    """Judge every complete item of a run folder with each judge model: resumable (an item judged pass or fail
    for its attempt is skipped, an error judged again), budgeted, parallel, rate-limit aware."""
    folder = RunFolder(run_dir)
    manifest = read_manifest(folder)
    check_judges(manifest.pinned_models, options.judge_models, allow_same=options.allow_same_judge)
    if options.budget_usd is not None:
        unpriced = [j for j in options.judge_models if price_for(j) is None]
        if unpriced:
            raise UsageError(
                f"no list price for judge model {', '.join(unpriced)}: --budget-usd cannot be enforced",
                hint="use a judge model in ablate's price table, or drop --budget-usd",
            )
    busy = RunFolderError(
        f"{folder.root}: another `ablate judge` is grading this run folder",
        hint="wait for it to finish; a second judge would pay for the same verdicts",
    )
    with grades_lock(folder, ".judge.lock", busy=busy):  # one judge at a time: two would pay twice
        return _judge_locked(folder, manifest, options, client, stop or threading.Event(), on_progress, sleep)


def _judge_locked(
    folder: RunFolder,
    manifest: RunManifest,
    options: JudgeOptions,
    client: MessagesClient | None,
    stop: threading.Event,
    on_progress: Callable[[str], None] | None,
    sleep: Callable[[float], None],
) -> JudgeSummary:
    tasks = load_run_tasks(folder, manifest)
    summary = JudgeSummary(folder=folder.root)
    units: list[_Unit] = []
    results = [r for r in iter_results(folder) if r.complete]
    for res in results:
        task = tasks.get(res.task)
        if task is None or (options.split != "both" and task.spec.split != options.split):
            continue
        inp = judge_input(folder, manifest, task, res)
        if inp is None:
            summary.not_judgeable += 1
            continue
        grade = read_grade(folder, res.item)
        for j in options.judge_models:
            v = grade.verdict(j, res.attempt) if grade else None
            if v is not None and v.verdict != "error":
                summary.skipped += 1
            else:
                units.append(_Unit(res, j, inp))
    summary.spend_usd = _recorded_spend(folder, results)
    the_client = client if client is not None else (make_client() if units else None)
    pending = list(units)
    running: dict[Future[JudgeVerdict | RateLimited], tuple[_Unit, int]] = {}
    backoff = Backoff(options.backoff)
    outcome: Literal["finished", "budget", "rate-limited", "interrupted"] | None = None

    def work(u: _Unit) -> JudgeVerdict | RateLimited:
        assert the_client is not None
        try:
            return judge_once(the_client, u.judge, u.inp, attempt=u.result.attempt)
        except RateLimited as exc:
            return exc

    with ThreadPoolExecutor(max_workers=max(1, options.jobs), thread_name_prefix="ablate-judge") as pool:
        while pending or running:
            now = time.monotonic()
            if outcome is None and stop.is_set():
                outcome = "interrupted"
            if outcome is None and options.budget_usd is not None and summary.spend_usd >= options.budget_usd:
                outcome = "budget"
            if outcome is None and backoff.exhausted:
                outcome = "rate-limited"
            if outcome is None and not backoff.paused(now):
                while pending and len(running) < options.jobs:
                    u = pending.pop(0)
                    running[pool.submit(work, u)] = (u, backoff.epoch)
            if not running:
                if outcome is not None:
                    break
                sleep(min(1.0, max(0.01, backoff.paused_until - time.monotonic())))
                continue
            done, _ = wait(list(running), timeout=0.25, return_when=FIRST_COMPLETED)
            for fut in done:
                u, epoch = running.pop(fut)
                got = fut.result()
                if isinstance(got, RateLimited):
                    summary.rate_limited += 1
                    pending.insert(0, u)
                    wait_s = backoff.rate_limited(time.monotonic(), got.retry_after_s or None, epoch=epoch)
                    if on_progress and wait_s is not None:
                        on_progress(f"judge rate-limited ({got}): pausing {wait_s:.1f} s")
                    continue
                backoff.succeeded(epoch=epoch)
                record_verdict(folder, u.result.item, got)
                summary.judged += 1
                summary.errors += got.verdict == "error"
                summary.spend_usd += got.cost_usd or 0.0
                if on_progress:
                    on_progress(f"{u.result.item} [{u.judge}]: {got.verdict} {got.reason}")
    summary.pending = len(pending)
    summary.outcome = outcome or "finished"
    summary.by_judge = verdict_counts(folder, results, options.judge_models)
    return summary


def _recorded_spend(folder: RunFolder, results: Sequence[ItemResult]) -> float:
    grades = [g for res in results if (g := read_grade(folder, res.item)) is not None]
    return sum((v.cost_usd or 0.0 for g in grades for v in g.judges), 0.0)


def verdict_counts(
    folder: RunFolder, results: Sequence[ItemResult], judges: Sequence[str]
) -> dict[str, dict[str, int]]:
    """pass / fail / error counts per judge over the given results' current attempts."""
    out = {j: {"pass": 0, "fail": 0, "error": 0} for j in judges}
    for res in results:
        grade = read_grade(folder, res.item)
        for j in judges:
            v = grade.verdict(j, res.attempt) if grade else None
            if v is not None:
                out[j][v.verdict] += 1
    return out

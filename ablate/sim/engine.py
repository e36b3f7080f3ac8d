"""Reading a Messages API request and deciding the answer: pure functions plus a thread-safe rule counter."""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ablate.core.constants import DEFAULT_MODEL
from ablate.core.jsonl import map_strings
from ablate.core.tokens import tokens_of_chars
from ablate.sim.script import Answer, ErrorAnswer, Rule, Script, Usage, Where

_REMINDER_RE = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_CWD_RE = re.compile(r"Primary working directory: ([^\n]+)")
_PLACEHOLDER_RE = re.compile(r"\$\{([a-z_]+)\}")


def _dump(obj: Any) -> str:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS).decode()


def content_text(content: Any) -> str:
    """All text of one message's ``content`` (a string or blocks), tool inputs and results included."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else _dump(content)
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            parts.append(str(block))
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            parts.append(f"{block.get('name', '')} {_dump(block.get('input', {}))}")
        elif kind == "tool_result":
            parts.append(content_text(block.get("content", "")))
        elif kind == "thinking":
            parts.append(str(block.get("thinking", "")))
        else:
            parts.append(_dump(block))
    return "\n".join(parts)


def system_text(body: Mapping[str, Any]) -> str:
    """The text of the request's ``system`` field (a string or a list of text blocks)."""
    return content_text(body.get("system", ""))


def messages_text(body: Mapping[str, Any]) -> str:
    """The text of every message, in order (a ``role: system`` message included)."""
    messages = body.get("messages") or []
    return "\n".join(content_text(m.get("content")) for m in messages if isinstance(m, dict))


def tools_text(body: Mapping[str, Any]) -> str:
    """Every tool's name, description and input schema."""
    parts = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            schema = _dump(tool.get("input_schema", {}))
            parts.append(f"{tool.get('name', '')}\n{tool.get('description', '')}\n{schema}")
    return "\n".join(parts)


def request_text(body: Mapping[str, Any]) -> str:
    """All text of a request (system, messages with tool inputs and results, tools): what canaries search."""
    return "\n".join((system_text(body), messages_text(body), tools_text(body)))


def assistant_turns(body: Mapping[str, Any]) -> int:
    """How many assistant messages the conversation already has (0 for the first request of a session)."""
    return sum(1 for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "assistant")


def first_user_text(body: Mapping[str, Any]) -> str:
    """The text of the first ``user`` message (Claude Code puts system-reminders there, then the prompt)."""
    return _user_text(body.get("messages") or [])


def last_user_text(body: Mapping[str, Any]) -> str:
    """The text of the last ``user`` message (tool results, once the conversation is under way)."""
    return _user_text(reversed(body.get("messages") or []))


def _user_text(messages: Iterable[Any]) -> str:
    found = next((m for m in messages if isinstance(m, dict) and m.get("role") == "user"), None)
    return content_text(found.get("content")) if found else ""


def prompt_text(body: Mapping[str, Any]) -> str:
    """The first user message without its ``<system-reminder>`` blocks: the prompt as the user typed it."""
    return _REMINDER_RE.sub("", first_user_text(body)).strip()


#: What a rule's ``where`` searches (:class:`ablate.sim.script.Rule`).
_TEXTS = {
    "request": request_text, "system": system_text, "messages": messages_text, "tools": tools_text,
    "first_user": first_user_text, "prompt": prompt_text, "last_user": last_user_text,
}  # fmt: skip


@dataclass(frozen=True)
class RequestView:
    """One request as rules see it."""

    body: Mapping[str, Any]
    session_id: str | None
    """The ``x-claude-code-session-id`` header, when present."""

    @property
    def turn(self) -> int:
        return assistant_turns(self.body)

    @property
    def model(self) -> str:
        return str(self.body.get("model") or DEFAULT_MODEL)

    @property
    def cwd(self) -> str:
        m = _CWD_RE.search(system_text(self.body)) or _CWD_RE.search(messages_text(self.body))
        return m.group(1).strip() if m else ""

    def text(self, where: Where) -> str:
        return _TEXTS[where](self.body)

    @property
    def session_key(self) -> str:
        """What ``times_per = "session"`` counts by: the session header, else a hash of the first message."""
        if self.session_id:
            return self.session_id
        return "fm:" + hashlib.sha256(first_user_text(self.body).encode()).hexdigest()[:16]


def draw(seed: int, rule: str, seed_text: str) -> float:
    """A deterministic uniform number in [0, 1) from the run seed, the rule name and the seed text."""
    digest = hashlib.sha256(f"{seed}\0{rule}\0{seed_text}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


@dataclass(frozen=True)
class Decision:
    """Which rule answered (``"default"`` when none did) and its answer."""

    rule: str
    answer: Answer


class Responder:
    """Applies a script to requests. Thread-safe: ``times`` counters are shared across handler threads."""

    def __init__(self, script: Script, seed: int = 0) -> None:
        self.script = script
        self.seed = seed
        self._lock = threading.Lock()
        self._fired: dict[tuple[str, str], int] = {}

    def seed_text(self, view: RequestView) -> str:
        mode = self.script.seed_from
        if mode == "prompt":
            return prompt_text(view.body)
        if mode == "session":  # the prompt, not the reminders: paths and the date must not move a draw
            if view.session_id:
                return f"{view.session_id}\0{prompt_text(view.body)}"
            return f"\0{first_user_text(view.body)}"
        return first_user_text(view.body)

    def _matches(self, rule: Rule, view: RequestView) -> bool:
        if not rule.turn_matches(view.turn):
            return False
        if rule.model is not None and rule.model not in view.model:
            return False
        if rule.contains or rule.not_contains or rule.regex:
            text = view.text(rule.where)
            if any(s not in text for s in rule.contains):
                return False
            if any(s in text for s in rule.not_contains):
                return False
            if rule.regex is not None and not re.search(rule.regex, text, re.DOTALL):
                return False
        return not (
            rule.probability < 1.0 and draw(self.seed, rule.name, self.seed_text(view)) >= rule.probability
        )

    def decide(self, view: RequestView) -> Decision:
        """The first rule that matches, fires (probability) and has ``times`` left; else the default."""
        for rule in self.script.rules:
            if not self._matches(rule, view):
                continue
            if rule.times is None:
                return Decision(rule.name, rule)
            key = (rule.name, view.session_key if rule.times_per == "session" else "")
            with self._lock:
                used = self._fired.get(key, 0)
                if used < rule.times:
                    self._fired[key] = used + 1
                    return Decision(rule.name, rule)
        return Decision("default", self.script.default)

    def usage_for(self, answer: Answer) -> Usage:
        """The answer's usage; fields it does not set come from the script's top-level ``usage``."""
        if answer.usage is None:
            return self.script.usage
        own = {name: getattr(answer.usage, name) for name in answer.usage.model_fields_set}
        return self.script.usage.model_copy(update=own)

    def message(self, view: RequestView, decision: Decision) -> dict[str, Any]:
        """The Messages API ``message`` object for a non-error decision."""
        answer = decision.answer
        model = self.script.model or view.model
        values = {
            "cwd": view.cwd,
            "session_id": view.session_id or "",
            "turn": str(view.turn),
            "rule": decision.rule,
            "model": model,
        }
        msg_id = message_id(view, decision.rule)
        content: list[dict[str, Any]] = []
        if answer.text is not None:
            content.append({"type": "text", "text": _fill(answer.text, values)})
        for i, call in enumerate(answer.tool_use):
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_sim_{hashlib.sha256(f'{msg_id}:{i}'.encode()).hexdigest()[:22]}",
                    "name": call.name,
                    "input": _fill(call.input, values),
                }
            )
        stop = answer.stop_reason or ("tool_use" if answer.tool_use else "end_turn")
        return {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage_dict(self.usage_for(answer), view.body, content),
        }


def message_id(view: RequestView, rule: str) -> str:
    """Deterministic id: hash of the first user message, the turn, the rule and the system text."""
    key = f"{first_user_text(view.body)}\0{view.turn}\0{rule}\0{system_text(view.body)}"
    return "msg_sim_" + hashlib.sha256(key.encode()).hexdigest()[:24]


def estimate_tokens(text: str) -> int:
    """A rough token count (:func:`ablate.core.tokens.tokens_of_chars`), at least 1."""
    return max(1, tokens_of_chars(len(text)))


def usage_dict(usage: Usage, body: Mapping[str, Any], content: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``usage`` object of an answer, resolving ``"auto"`` counts."""
    inp = usage.input_tokens
    if inp == "auto":
        inp = estimate_tokens(request_text(body))
    out = usage.output_tokens
    if out == "auto":
        out = estimate_tokens(content_text(list(content)))
    return {
        "input_tokens": inp,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "output_tokens": out,
        "service_tier": "standard",
    }


def error_body(error: ErrorAnswer) -> dict[str, Any]:
    """The real API's JSON error body."""
    return {"type": "error", "error": {"type": error.error_type, "message": error.error_message}}


def _fill(value: Any, values: Mapping[str, str]) -> Any:
    return map_strings(
        value, lambda text: _PLACEHOLDER_RE.sub(lambda m: values.get(m.group(1), m.group(0)), text)
    )

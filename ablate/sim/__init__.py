"""ablate's simulated Anthropic Messages endpoint (capture and scripted modes).

The real ``claude`` CLI talks to it through ``ANTHROPIC_BASE_URL``; it records every request and answers from
a script of rules, so ablate can probe what reaches the model and test runs without network or API key."""

from ablate.sim.engine import (
    Decision,
    RequestView,
    Responder,
    assistant_turns,
    content_text,
    draw,
    first_user_text,
    messages_text,
    prompt_text,
    request_text,
    system_text,
    tools_text,
)
from ablate.sim.script import (
    Answer,
    ErrorAnswer,
    Rule,
    Script,
    ToolCall,
    TurnRange,
    Usage,
    load_script,
    script_from_data,
)
from ablate.sim.server import CapturedRequest, PortInUse, SimServer, iter_requests

__all__ = [
    "Answer",
    "CapturedRequest",
    "Decision",
    "ErrorAnswer",
    "PortInUse",
    "RequestView",
    "Responder",
    "Rule",
    "Script",
    "SimServer",
    "ToolCall",
    "TurnRange",
    "Usage",
    "assistant_turns",
    "content_text",
    "draw",
    "first_user_text",
    "iter_requests",
    "load_script",
    "messages_text",
    "prompt_text",
    "request_text",
    "script_from_data",
    "system_text",
    "tools_text",
]

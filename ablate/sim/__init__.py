"""ablate's simulated Anthropic Messages endpoint (capture and scripted modes).

The real ``claude`` CLI talks to it through ``ANTHROPIC_BASE_URL``; it records every request and answers from
a script of rules, so ablate can probe what reaches the model and test runs without network or API key."""

from ablate.sim.engine import (
    Decision as Decision,
    RequestView as RequestView,
    Responder as Responder,
    assistant_turns as assistant_turns,
    content_text as content_text,
    draw as draw,
    first_user_text as first_user_text,
    messages_text as messages_text,
    prompt_text as prompt_text,
    request_text as request_text,
    system_text as system_text,
    tools_text as tools_text,
)
from ablate.sim.script import (
    Answer as Answer,
    ErrorAnswer as ErrorAnswer,
    Rule as Rule,
    Script as Script,
    ToolCall as ToolCall,
    TurnRange as TurnRange,
    Usage as Usage,
    load_script as load_script,
    script_from_data as script_from_data,
)
from ablate.sim.server import (
    CapturedRequest as CapturedRequest,
    PortInUse as PortInUse,
    SimServer as SimServer,
    iter_requests as iter_requests,
)

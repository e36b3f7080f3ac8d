"""ablate's simulated Anthropic Messages endpoint (capture and scripted modes).

The real ``claude`` CLI talks to it through ``ANTHROPIC_BASE_URL``; it records every request and answers from
a script of rules, so ablate can probe what reaches the model and test runs without network or API key."""

from ablate.sim.engine import (
    RequestView as RequestView,
    Responder as Responder,
    draw as draw,
    prompt_text as prompt_text,
    request_text as request_text,
)
from ablate.sim.script import (
    Script as Script,
    load_script as load_script,
    script_from_data as script_from_data,
)
from ablate.sim.server import PortInUse as PortInUse, SimServer as SimServer, iter_requests as iter_requests

"""The ONE process-environment allow-list (docs/ARCHITECTURE.md#process-env says what passes), used by every
environment builder and by the probe; :func:`one_endpoint` enforces docs/ARCHITECTURE.md#one-endpoint.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from ablate.core.endpoint import environ_simulated
from ablate.core.errors import UsageError
from ablate.folder.layout import EndpointInfo
from ablate.setup.layers import json_keys

#: Inherited as is: the ordinary process basics.
ENV_ALLOW = ("PATH", "USER", "SHELL", "LANG", "TERM")
ENV_ALLOW_PREFIXES = ("LC_",)
#: Where the model is: the endpoint and the provider switches.
ENV_ENDPOINT = (
    "ANTHROPIC_BASE_URL", "ANTHROPIC_CUSTOM_HEADERS", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_USE_FOUNDRY", "CLAUDE_CODE_SKIP_BEDROCK_AUTH", "CLAUDE_CODE_SKIP_VERTEX_AUTH",
    "CLAUDE_CODE_SKIP_FOUNDRY_AUTH", "ANTHROPIC_BEDROCK_BASE_URL", "ANTHROPIC_VERTEX_BASE_URL",
    "ANTHROPIC_FOUNDRY_BASE_URL", "ANTHROPIC_FOUNDRY_RESOURCE", "ANTHROPIC_VERTEX_PROJECT_ID",
    "CLOUD_ML_REGION", "GOOGLE_CLOUD_PROJECT",
)  # fmt: skip
#: Who pays: keys, tokens and cloud credentials.
ENV_AUTH = (
    "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_FOUNDRY_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN",
    "GOOGLE_APPLICATION_CREDENTIALS",
)  # fmt: skip
ENV_AUTH_PREFIXES = ("AWS_", "VERTEX_REGION_")
#: Network plumbing a corporate setup needs to reach its endpoint at all (no effect on behaviour).
ENV_NETWORK = (
    "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy", "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE", "SSL_CERT_DIR",
)  # fmt: skip
#: Pinned knobs, the same in every cell (``extra_env`` may override them).
ENV_PINNED = {"CLAUDE_CODE_MAX_RETRIES": "2", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1"}
#: Set by ablate for environments it built itself: isolation is ablate's, not the user's. ``TMPDIR`` is the
#: session's own writable folder: the caller's may be read-only in a view (``/var/tmp/…``, ``~/tmp``, macOS's
#: ``/var/folders``), where the CLI stops at its first ``mkdir``.
ENV_OWNED = ("HOME", "CLAUDE_CONFIG_DIR", "IS_SANDBOX", "TMPDIR")
#: The key every probe session gets: the capture endpoint accepts anything, the real API nothing.
PROBE_KEY = "sk-ablate-probe"

_SECRET = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH|CUSTOM_HEADERS)", re.IGNORECASE)
_URL_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
#: Settings keys that choose where traffic goes or run a credential helper (docs/ARCHITECTURE.md#one-endpoint).
SETTINGS_HELPERS = ("apiKeyHelper", "awsAuthRefresh", "awsCredentialExport", "otelHeadersHelper")


def allowed(key: str) -> bool:
    """Whether a session may inherit ``key`` from the caller's environment."""
    return (
        key in ENV_ALLOW
        or key.startswith(ENV_ALLOW_PREFIXES)
        or key in ENV_ENDPOINT
        or key in ENV_AUTH
        or key.startswith(ENV_AUTH_PREFIXES)
        or key in ENV_NETWORK
    )


def is_endpoint_or_auth(key: str) -> bool:
    """Endpoint, provider, credential or proxy variable: what decides where traffic goes and who pays."""
    return (
        key in ENV_ENDPOINT
        or key in ENV_AUTH
        or key.startswith(ENV_AUTH_PREFIXES)
        or key in ENV_NETWORK
        or key.startswith(("ANTHROPIC_", "CLAUDE_CODE_USE_", "CLAUDE_CODE_SKIP_"))
    )


def stray(key: str) -> bool:
    """A ``CLAUDE_*``/``ANTHROPIC_*`` variable that no builder passes: it changes the cell."""
    return (
        key.startswith(("CLAUDE_", "ANTHROPIC_"))
        and not allowed(key)
        and key not in ENV_PINNED
        and key not in ENV_OWNED
    )


def process_env(
    base_env: Mapping[str, str],
    *,
    home: Path,
    config_dir: Path,
    tmpdir: Path | str,
    extra_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The whole, explicit environment of a session: allow-listed, auth, pinned; everything else dropped.
    ``tmpdir`` is its ``TMPDIR``, a folder it may write (a view's private ``/tmp``, a cell's ``tmp/``)."""
    env = {key: value for key, value in base_env.items() if allowed(key)}
    env.update(ENV_PINNED, HOME=str(home), CLAUDE_CONFIG_DIR=str(config_dir), TMPDIR=str(tmpdir))
    if os.geteuid() == 0:  # bypassPermissions as root needs it; an ordinary user's session never gets it
        env["IS_SANDBOX"] = "1"
    for key, value in (extra_env or {}).items():
        if key in ENV_OWNED:
            raise UsageError(
                f"extra env may not set {key}: ablate sets it to isolate the cell",
                hint="drop it from the extra environment",
            )
        env[key] = value
    return dict(sorted(env.items()))


def force_capture(env: Mapping[str, str], base_url: str) -> dict[str, str]:
    """``env`` for a probe session: endpoint, credential and proxy variables replaced by the capture's."""
    out = {k: v for k, v in env.items() if not is_endpoint_or_auth(k)}
    out.update(ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY=PROBE_KEY, CLAUDE_CODE_MAX_RETRIES="0")
    out["NO_PROXY"] = out["no_proxy"] = "127.0.0.1,localhost"
    return dict(sorted(out.items()))


def is_secret(key: str) -> bool:
    return bool(_SECRET.search(key))


def redact_value(value: str) -> str:
    """Credentials inside URLs (``scheme://user:pw@host``) become ``***@``."""
    return _URL_USERINFO.sub("***@", value)


def redacted_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for manifests and reports: secret values become ``***``, credentials in URLs too."""
    return {
        key: ("***" if value else "") if is_secret(key) else redact_value(value) for key, value in env.items()
    }


# ---------------------------------------------------------------------------------------------------------
# One endpoint for all cells (docs/ARCHITECTURE.md#one-endpoint)


def settings_files(config_dir: Path, repo: Path) -> list[Path]:
    """The settings files the CLI reads for a session in ``repo`` with ``config_dir`` (user, project, local)."""
    return [
        config_dir / "settings.json",
        config_dir / "settings.local.json",
        repo / ".claude" / "settings.json",
        repo / ".claude" / "settings.local.json",
    ]


def settings_problem(path: Path) -> str | None:
    """Why Claude Code would skip or misread the settings file ``path``; None when it reads it (or none)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return f"cannot be read ({getattr(exc, 'strerror', None) or exc})"
    try:
        data = json.loads(text)
    except ValueError as exc:
        return f"not valid JSON ({exc})"
    if not isinstance(data, dict):
        return f"not a JSON object (a {type(data).__name__})"
    env = data.get("env")
    if env is not None and not isinstance(env, dict):
        return f'env is a {type(env).__name__}, not an object of NAME: "value" strings'
    for key, value in (env or {}).items():
        if not isinstance(value, str):
            return f'env.{key} is {json.dumps(value)}, not a string: quote it ("{key}": "{value}")'
    return None


#: What a settings file the CLI cannot parse means, for a refusal or a warning.
SETTINGS_SKIPPED = (
    "Claude Code skips a settings file it cannot parse (its hooks, permissions and env with it), in every "
    "cell alike: fix the file so the cells test your setup as you mean it"
)


def one_endpoint(config_dir: Path, repo: Path, environ: Mapping[str, str]) -> EndpointInfo:
    """Every cell reaches the same endpoint with the same auth, or a ``UsageError`` naming the file, key and
    fix: a settings ``env`` endpoint or auth key must equal ablate's own environment; no credential helper."""
    broken = [f"{p}: {why}" for p in settings_files(config_dir, repo) if (why := settings_problem(p))]
    if broken:
        raise UsageError("\n".join(broken), hint=SETTINGS_SKIPPED)
    check = EndpointInfo()
    problems: list[str] = []
    for path in settings_files(config_dir, repo):
        data = json_keys(path) or {}
        env = data.get("env")
        if isinstance(env, dict):
            for key, value in sorted(env.items()):
                if not is_endpoint_or_auth(str(key)):
                    continue
                shown = "***" if is_secret(str(key)) else redact_value(str(value))
                check.settings_env[f"{path}:env.{key}"] = shown
                if environ.get(str(key)) != str(value):
                    problems.append(
                        f"{path}: env.{key} sets the endpoint or auth for the cells that keep this file, "
                        f"but not for C11 (empty config): export {key} with the same value before running "
                        "(ablate passes it to every cell alike)"
                    )
        for helper in SETTINGS_HELPERS:
            if data.get(helper):
                check.helpers.append(f"{path}:{helper}")
                problems.append(
                    f"{path}: {helper} runs a credential helper only in cells that keep this file: export "
                    "the credential it produces (ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN) and remove "
                    f"{helper}, or run with a copy of the config dir without it (--config-dir)"
                )
    if problems:
        raise UsageError(
            "one endpoint for all cells (docs/ARCHITECTURE.md#one-endpoint): the setup routes some cells differently\n  "
            + "\n  ".join(problems),
            hint="set the endpoint and auth in the environment ablate runs in, where every cell gets them",
        )
    check.applied = redacted_env({k: v for k, v in environ.items() if allowed(k) and is_endpoint_or_auth(k)})
    check.simulated = environ_simulated(environ)
    return check

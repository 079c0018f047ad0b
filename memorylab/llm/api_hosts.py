"""Where the model calls an experiment spec asks for may go.

A spec is data anyone who can open a pull request may write, and ``memorylab eval`` runs it with the
environment's provider keys, which litellm sends to whatever ``api_base`` a call names. So a spec's
completion options are the generation settings of ``SPEC_COMPLETION_OPTIONS`` only, its model strings
name no host, and an ``api_base`` must name a host the user allowed: ``memorylab eval --allow-host HOST``,
``Experiments(store, allowed_hosts=[HOST])`` or ``MEMORYLAB_ALLOWED_API_HOSTS=HOST,HOST``. None is
allowed by default. A provider's own host (no ``api_base``) and the embedded model need no permission.
"""
from __future__ import annotations

import os
from urllib.parse import urlsplit

from ..errors import ApiHostNotAllowedError, InvalidInputError

ALLOWED_HOSTS_VARIABLE = "MEMORYLAB_ALLOWED_API_HOSTS"
SPEC_COMPLETION_OPTIONS = ("temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "seed",
                           "presence_penalty", "frequency_penalty", "reasoning_effort", "timeout", "num_retries",
                           "mock_response", "mock_delay", "api_base")
"""What a spec's ``completion`` may hold: how the model writes, and ``api_base`` (held to the allowed hosts).
Anything else a litellm call takes (``base_url``, ``custom_llm_provider``, ``api_version``, headers,
``litellm_params``, callbacks) could send the request, or the key with it, somewhere else."""
_DEFAULT_PORTS = {"http": 80, "https": 443}


def allowed_api_hosts(extra=()) -> frozenset:
    """The hosts a spec's ``api_base`` may name: ``extra`` and those listed in MEMORYLAB_ALLOWED_API_HOSTS.
    Each is ``host`` (any port) or ``host:port``."""
    named = [*extra, *os.environ.get(ALLOWED_HOSTS_VARIABLE, "").split(",")]
    return frozenset(host.strip().lower() for host in named if host.strip())


def spec_call_problems(models, completion) -> list[str]:
    """What keeps a spec's model strings (``{"model": "openai/gpt-4o-mini"}``, by setting name) and its
    completion options from being sent as they are, as sentences; [] when nothing does."""
    problems = [f"{name} {model!r} names a host: name a provider's model (such as 'openai/gpt-4o-mini') and "
                "a server of your own with api_base" for name, model in models.items()
                if isinstance(model, str) and "://" in model]
    if "api_key" in completion:
        problems.append("completion must not hold api_key: keys come from the environment")
    refused = [key for key in completion if key not in SPEC_COMPLETION_OPTIONS and key != "api_key"]
    if refused:
        problems.append(f"completion may not hold {', '.join(map(repr, refused))}: a spec's completion takes "
                        f"{', '.join(SPEC_COMPLETION_OPTIONS)}")
    if "api_base" in completion and _endpoint(completion["api_base"]) is None:
        problems.append(f"completion api_base must be an http:// or https:// URL with a host, got "
                        f"{completion['api_base']!r}")
    return problems


def api_host_refusal(completion, allowed_hosts) -> str | None:
    """Why a call with these completion options may not go where its ``api_base`` says, or None
    (none given, or its host is among ``allowed_hosts`` as ``allowed_api_hosts`` reads them)."""
    api_base = completion.get("api_base")
    if api_base is None:
        return None
    endpoint = _endpoint(api_base)
    if endpoint is None:
        return f"api_base must be an http:// or https:// URL with a host, got {api_base!r}"
    host, port, shown = endpoint
    if host in allowed_hosts or f"{host}:{port}" in allowed_hosts or shown in allowed_hosts:
        return None
    return (f"api_base host {shown!r} is not allowed: a spec may send the environment's provider key only to a "
            f"host you allow. Allow it with `memorylab eval --allow-host {shown}`, "
            f"Experiments(..., allowed_hosts=[{shown!r}]) or {ALLOWED_HOSTS_VARIABLE}={shown}")


def api_base_host(api_base) -> str | None:
    """The host an ``api_base`` URL sends to, as ``--allow-host`` takes it (with its port when the URL
    names one), or None when it is not an http(s) URL."""
    endpoint = _endpoint(api_base)
    return endpoint[2] if endpoint else None


def check_spec_call(models, completion, allowed_hosts=()) -> None:
    """Right before a model call a spec asked for: InvalidInputError for what a spec may not hold,
    ApiHostNotAllowedError for an ``api_base`` host the user did not allow."""
    problems = spec_call_problems(models, completion)
    if problems:
        raise InvalidInputError("; ".join(problems))
    refusal = api_host_refusal(completion, allowed_api_hosts(allowed_hosts))
    if refusal:
        raise ApiHostNotAllowedError(refusal)


def _endpoint(api_base) -> tuple[str, int, str] | None:
    """``(host, port, shown)`` of an http(s) URL (``shown`` as the user would allow it: the host, with the
    port when the URL names one), or None when ``api_base`` is not such a URL."""
    if not isinstance(api_base, str):
        return None
    try:
        parts = urlsplit(api_base.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    named = f"[{host}]" if ":" in host else host
    return host, port or _DEFAULT_PORTS[scheme], f"{named}:{port}" if port else named

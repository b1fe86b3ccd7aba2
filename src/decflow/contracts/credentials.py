"""URL and header rules that keep secrets out of contracts, and where credentials may go.

Contracts name environment variables; they never hold credentials. These checks reject the
usual ways a secret sneaks in: userinfo in a URL, a credential-like query parameter, or a
literal credential header.

A credential is only ever sent to an origin the environment allows, never on the
contract's word alone: `DECFLOW_ALLOW_CREDENTIALS` lists origins (`https://api.openai.com,
http://127.0.0.1:8080`), each optionally bound to one variable
(`OPENAI_API_KEY@https://api.openai.com`). A contract (from a pull request, say) naming
`GITHUB_TOKEN` toward its own server is refused before any request (`refusal`).
"""

from __future__ import annotations

import os
import re
from urllib.parse import parse_qsl, urlsplit

from decflow.errors import ConfigurationError

CREDENTIAL_QUERY_PARAMS = frozenset(
    {"api_key", "apikey", "access_token", "token", "key", "signature", "auth", "password"}
)
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key"})
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_FROM_ENV = "send credentials from the environment (bearer_token_env or headers_from_env)"


def check_url(value: str) -> str:
    parts = urlsplit(value)
    try:
        parts.port  # noqa: B018 - a malformed port raises here
    except ValueError as exc:
        raise ValueError(f"invalid URL {value!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be an absolute http or https URL with a host, got {value!r}")
    if "@" in parts.netloc:
        raise ValueError(
            f"credentials in the URL (user:password@host) are not allowed; {_FROM_ENV}"
        )
    for name, _ in parse_qsl(parts.query, keep_blank_values=True):
        if name.lower() in CREDENTIAL_QUERY_PARAMS:
            raise ValueError(f"query parameter {name!r} looks like a credential; {_FROM_ENV}")
    return value


def origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return (
        parts.scheme,
        (parts.hostname or "").lower(),
        parts.port or _DEFAULT_PORTS.get(parts.scheme),
    )


def check_header_name(name: str) -> str:
    if not _HEADER_NAME.match(name):
        raise ValueError(f"{name!r} is not a valid HTTP header name")
    return name


def check_static_header(name: str) -> str:
    check_header_name(name)
    if name.lower() in CREDENTIAL_HEADERS:
        raise ValueError(
            f"{name!r} looks like a credential; set it with bearer_token_env or "
            "headers_from_env (environment variable names), never as a literal header"
        )
    return name


def check_header_value(value: str) -> str:
    if any(char in value for char in "\0\r\n"):
        raise ValueError("header values must not contain line breaks or NUL bytes")
    return value


# -- which origins may receive a credential ---------------------------------------------

ALLOW_ENV = "DECFLOW_ALLOW_CREDENTIALS"
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
Origin = tuple[str, str, int | None]


def origin_text(url: str) -> str:
    """`scheme://host[:port]` of a URL, the port shown only when it is not the default."""
    scheme, host, port = origin(url)
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}" if port == _DEFAULT_PORTS.get(scheme) else (
        f"{scheme}://{shown}:{port}")


def _allowed_entry(entry: str) -> tuple[str | None, Origin]:
    variable, at, url = entry.rpartition("@")
    if at and not _VARIABLE.match(variable):
        variable, url = "", entry  # an "@" that is not VARIABLE@origin
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - a malformed port raises here
    except ValueError:
        parts = urlsplit("")
    if (parts.scheme not in ("http", "https") or not parts.hostname or parts.username
            or parts.path not in ("", "/") or parts.query or parts.fragment):
        raise ConfigurationError(
            f"{ALLOW_ENV}: {entry!r} is not an origin; list origins such as "
            "https://api.openai.com or http://127.0.0.1:8080, separated by commas, each "
            "optionally as VARIABLE@origin to allow only that variable there"
        )
    return (variable or None), origin(url)


def allowed_origins() -> list[tuple[str | None, Origin]]:
    """The environment's allowlist: (variable or None for any, origin) pairs."""
    text = os.environ.get(ALLOW_ENV, "")
    return [_allowed_entry(entry.strip()) for entry in text.split(",") if entry.strip()]


def is_allowed(variable: str, url: str) -> bool:
    target = origin(url)
    return any(found == target and (allowed is None or allowed == variable)
               for allowed, found in allowed_origins())


def refusal(variable: str, url: str, where: str) -> str:
    """Why the credential in `variable` is not sent to `url`'s origin, and what to do."""
    shown = origin_text(url)
    return (
        f"{where}: the credential in {variable} would be sent to {shown}, an origin the "
        f"environment does not allow; if you trust {shown} with it, add it to {ALLOW_ENV} "
        f"(e.g. {ALLOW_ENV}={shown}; origins separated by commas)"
    )

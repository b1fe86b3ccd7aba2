"""URL and header rules that keep secrets out of contracts.

Contracts name environment variables; they never hold credentials. These checks reject the
usual ways a secret sneaks in: userinfo in a URL, a credential-like query parameter, or a
literal credential header.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

CREDENTIAL_QUERY_PARAMS = frozenset(
    {"api_key", "apikey", "access_token", "token", "key", "signature", "auth", "password"}
)
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key"})
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
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
    if "\r" in value or "\n" in value:
        raise ValueError("header values must not contain line breaks")
    return value

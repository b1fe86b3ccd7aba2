"""Object storage: one configuration for every reader of `s3://…` URLs.

Records and the store can live on S3-compatible storage. They are read by two clients:
fsspec (s3fs: the store, JSON records, hashing) and polars' own object-store reader
(Parquet records). Both are configured from the same standard environment variables:
`AWS_ENDPOINT_URL` (an S3-compatible server; `http://` allowed), `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN` and `AWS_REGION` (or `AWS_DEFAULT_REGION`).
Credentials are only read here and never written anywhere.
"""

from __future__ import annotations

import io
import os
from typing import Any

from decflow.errors import DecflowError


def is_url(path: str) -> bool:
    """A remote location (`scheme://…`, other than `file://`)."""
    return "://" in path and not path.startswith("file://")


def _settings() -> dict[str, str]:
    names = {
        "endpoint": "AWS_ENDPOINT_URL",
        "key": "AWS_ACCESS_KEY_ID",
        "secret": "AWS_SECRET_ACCESS_KEY",
        "token": "AWS_SESSION_TOKEN",
    }
    found = {name: os.environ[var] for name, var in names.items() if os.environ.get(var)}
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        found["region"] = region
    return found


def fsspec_options(url: str) -> dict[str, Any]:
    """Keyword arguments for `fsspec.core.url_to_fs(url, …)`."""
    if not url.startswith(("s3://", "s3a://")):
        return {}
    settings = _settings()
    options: dict[str, Any] = {}
    for name in ("key", "secret", "token"):
        if name in settings:
            options[name] = settings[name]
    client = {k: settings[s] for k, s in (("endpoint_url", "endpoint"),
                                          ("region_name", "region")) if s in settings}
    if client:
        options["client_kwargs"] = client
    return options


def polars_options(url: str) -> dict[str, str] | None:
    """`storage_options` for polars' object-store reader (None for local paths)."""
    if not url.startswith(("s3://", "s3a://")):
        return None
    settings = _settings()
    names = {"endpoint": "aws_endpoint_url", "key": "aws_access_key_id",
             "secret": "aws_secret_access_key", "token": "aws_session_token",
             "region": "aws_region"}
    options = {names[k]: v for k, v in settings.items()}
    if settings.get("endpoint", "").startswith("http://"):
        options["aws_allow_http"] = "true"
    return options


def filesystem(url: str) -> tuple[Any, str]:
    """(fsspec filesystem, path within it) for a URL."""
    import fsspec

    try:
        found: tuple[Any, str] = fsspec.core.url_to_fs(url, **fsspec_options(url))
        return found
    except (ImportError, ValueError) as exc:
        raise DecflowError(f"{url}: {exc}") from None


def open_input(path: str) -> io.BufferedIOBase:
    """A remote file opened for reading (local files are opened by their callers)."""
    fs, inner = filesystem(path)
    handle: io.BufferedIOBase = fs.open(inner, "rb")  # fsspec's buffered file
    return handle

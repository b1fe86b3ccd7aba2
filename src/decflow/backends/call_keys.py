"""Call-cache keys: which stored answer, if any, may stand for a request.

A key is the sha256 of
- the request format (`CALL_FORMAT` here, `Backend.cache_format` of the backend),
- the backend's identity: provider, where it sends (the full URL, query included, and the
  contract's static headers, both as digests: `sent_to`), the configured model
  (`Backend.call_identity`, never a credential) and what the server reported about the
  model it serves (`Backend.model_identity`),
- the request as the backend sends it (`Backend.request_sent`: the prompt or messages, the
  labels as shown and in their order, readout, decoding and log-probability settings),
- the rollout: the request's id within the run (case, property, sample number), so the k-th
  stability rerun of a case and each of a property's samples keep answers of their own, and
  a second identical run replays them one by one instead of collapsing them into one.

An identity digest is computed once per run; each request then costs one JSON encoding and
one hash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urldefrag

CALL_FORMAT = "2"  # bump when what a key covers changes (2: the URL's query, static headers)


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str).encode()


def sent_to(url: str, headers: Mapping[str, str]) -> dict[str, str]:
    """Where a backend's requests go, for its `call_identity`: digests of the full URL (a
    query changes the request, and may hold a token) and of the static headers' sorted names
    and values (values may be secrets). The identity is stored as plain text, so never the
    values; headers from the environment (credentials) are left out. A fragment is never
    sent, so it is left out too."""
    return {"url_sha256": hashlib.sha256(urldefrag(url).url.encode()).hexdigest(),
            "headers_sha256": hashlib.sha256(_canonical(sorted(headers.items()))).hexdigest()}


def identity_digest(backend: dict[str, Any], served: dict[str, Any], cache_format: str) -> str:
    """The digest of everything that names the answering model, shared by a run's keys."""
    return hashlib.sha256(_canonical(
        {"format": [CALL_FORMAT, cache_format], "backend": backend, "served": served}
    )).hexdigest()


def call_key(identity: str, sent: Any, rollout: str) -> str:
    """The key of one request: the identity digest, the rollout and the request as sent."""
    digest = hashlib.sha256(identity.encode())
    digest.update(b"\x00" + rollout.encode() + b"\x00")
    digest.update(_canonical(sent))
    return digest.hexdigest()

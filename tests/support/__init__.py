"""Helpers shared by the test groups: paths, CLI runner, backend helpers, real HTTP
servers, the local LLM server fixture, and reference contracts/properties."""

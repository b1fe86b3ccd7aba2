"""Integration tests: the CLI end to end, real HTTP servers and the local LLM on 127.0.0.1,
the store on disk."""

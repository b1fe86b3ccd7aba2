"""Unit tests: pure modules, no server, no store on disk beyond tmp files."""

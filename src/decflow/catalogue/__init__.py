"""Persona catalogues as data: versioned per-language files (`en.json`, `de.json`), their
entries per axis, and the slots a persona template may name.

It sits below `contracts` (which validates a contract's persona template against it) and
`diagnostics` (which draws persona pairs from it), and imports nothing but the standard
library.
"""

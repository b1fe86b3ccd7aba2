"""PyYAML, imported without compiling the pattern of its pure-Python reader at start-up.

`import yaml` compiles `yaml.reader.Reader.NON_PRINTABLE`, a class of characters written as
what it excludes (`[^...]` up to U+10FFFF): `re` expands its ranges code point by code point
in Python, ~57 M instructions (~17 ms, 3 % of what a `decflow test` runs before its first
request). decflow parses with libyaml (`CSafeLoader`), which never uses that pattern. So
before PyYAML is first imported, the same set written as the characters it matches (a few
short ranges, compiled in well under a millisecond) is left in `re`'s cache of compiled
patterns under PyYAML's pattern: the reader gets an equivalent pattern without the expansion
(tests/unit/test_contracts_pyyaml.py compares the two on every code point). Where `re` keeps
no such cache (another Python), or PyYAML is already loaded, nothing changes.
"""

import re
import sys

# `yaml.reader.Reader.NON_PRINTABLE`'s pattern as PyYAML writes it (a key of `re`'s cache).
NON_PRINTABLE = "[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010ffff]"
# The characters it matches: C0 controls but tab and line breaks, DEL and C1 controls but
# NEL, surrogates, U+FFFE and U+FFFF.
NON_PRINTABLE_LISTED = "[\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x84\x86-\x9F\uD800-\uDFFF\uFFFE\uFFFF]"


def _cache_reader_pattern() -> None:
    cache = getattr(re, "_cache", None)
    if "yaml" not in sys.modules and isinstance(cache, dict):
        cache.setdefault((str, NON_PRINTABLE, 0), re.compile(NON_PRINTABLE_LISTED))


_cache_reader_pattern()

import yaml  # noqa: E402  (after the pattern is cached)

__all__ = ["yaml"]

"""decflow imports PyYAML with its reader's pattern of non-printable characters compiled
from an equivalent listing (`decflow.contracts.pyyaml`): the same characters, the same
errors, without expanding PyYAML's negated class at start-up."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml
import yaml.reader

from decflow.contracts.pyyaml import NON_PRINTABLE, NON_PRINTABLE_LISTED

EVERY_CODE_POINT = "".join(map(chr, range(sys.maxunicode + 1)))


def _in_a_new_process(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return done.stdout.strip()


def test_the_listing_matches_exactly_the_characters_pyyaml_excludes() -> None:
    excluded = re.compile(NON_PRINTABLE).findall(EVERY_CODE_POINT)
    assert re.compile(NON_PRINTABLE_LISTED).findall(EVERY_CODE_POINT) == excluded
    # C0 but tab, LF, CR; DEL and C1 but NEL; the surrogates; U+FFFE and U+FFFF
    assert len(excluded) == 29 + 32 + 2048 + 2


def test_the_cached_pattern_is_pyyamls_own() -> None:
    """PyYAML still writes the pattern the cache is keyed by (else the listing is unused)."""
    shown = _in_a_new_process(
        "import yaml.reader; print(ascii(yaml.reader.Reader.NON_PRINTABLE.pattern))"
    )
    assert shown == ascii(NON_PRINTABLE)


@pytest.mark.skipif(not isinstance(getattr(re, "_cache", None), dict),
                    reason="this Python's re keeps no pattern cache to fill")
def test_the_contract_loader_gives_the_reader_the_listing() -> None:
    shown = _in_a_new_process(
        "import decflow.contracts.loader, yaml.reader; "
        "print(ascii(yaml.reader.Reader.NON_PRINTABLE.pattern))"
    )
    assert shown == ascii(NON_PRINTABLE_LISTED)


@pytest.mark.parametrize("text", ["a: b\x07c", "x\x85y\ud800", "ok: \x7f", "\ufffe"])
def test_the_reader_reports_the_same_character_with_either_pattern(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    errors = []
    for pattern in (NON_PRINTABLE, NON_PRINTABLE_LISTED):
        monkeypatch.setattr(yaml.reader.Reader, "NON_PRINTABLE", re.compile(pattern))
        with pytest.raises(yaml.reader.ReaderError) as raised:
            yaml.load(text, Loader=yaml.SafeLoader)  # the pure-Python reader
        errors.append(str(raised.value))
    assert errors[0] == errors[1]
    assert f"#x{ord(text[re.compile(NON_PRINTABLE).search(text).start()]):04x}" in errors[0]

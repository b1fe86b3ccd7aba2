"""Untrusted text shown escaped: control characters, bidi controls, separators, surrogates."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from decflow.untrusted import escape, quote, shorten

BIDI = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
C0 = range(0x00, 0x20)
C1 = range(0x80, 0xA0)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),  # OSC 0: set the window title
        ("\x1b]52;c;cHduZWQ=\x07", "\\x1b]52;c;cHduZWQ=\\x07"),  # OSC 52: write the clipboard
        ("\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\",
         "\\x1b]8;;http://evil\\x1b\\click\\x1b]8;;\\x1b\\"),  # OSC 8: a planted link
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),  # CSI colour
        ("\x9b2J", "\\x9b2J"),  # the 8-bit CSI (C1)
        ("ok\rFAKE", "ok\\rFAKE"),
        ("a\bb\x7f", "a\\x08b\\x7f"),
        ("tab\there", "tab\\there"),
        ("invoice\u202etxt.exe", "invoice\\u202etxt.exe"),
        ("\u2066isolated\u2069", "\\u2066isolated\\u2069"),
        ("line\u2028sep\u2029para", "line\\u2028sep\\u2029para"),
        ("lone \ud800 surrogate", "lone \\ud800 surrogate"),
        ("nul\x00byte", "nul\\x00byte"),
    ],
)
def test_escapes(text: str, shown: str) -> None:
    assert escape(text) == shown


@pytest.mark.parametrize("code", [*C0, 0x7F, *C1, *BIDI, 0x2028, 0x2029, 0xD800, 0xDFFF])
def test_every_listed_character_is_escaped(code: int) -> None:
    shown = escape(f"a{chr(code)}b")
    assert chr(code) not in shown
    assert shown.startswith("a\\") and shown.endswith("b")
    assert shown.isprintable() and shown.isascii()


def test_nothing_else_changes() -> None:
    listed = {*C0, 0x7F, *C1, *BIDI, 0x2028, 0x2029, *range(0xD800, 0xE000)}
    others = "".join(chr(c) for c in range(0x20, 0x3100) if c not in listed)
    assert escape(others) == others
    kept = "Grüße, 東京, مرحبا, שלום, e\u0301, 👩\u200d💻, \\x1b typed by hand"
    assert escape(kept) == kept


def test_printable_output_for_every_code_point_below_0x3100() -> None:
    # The shown form never contains a character a terminal would act on.
    text = "".join(chr(c) for c in range(0x3100))
    shown = escape(text)
    assert all(unicodedata.category(ch) not in ("Cc", "Cs", "Zl", "Zp") for ch in shown)
    assert not any(chr(c) in shown for c in BIDI)
    shown.encode("utf-8")  # no lone surrogate left to fail on a UTF-8 terminal


def test_escaping_is_idempotent() -> None:
    text = "a\x1b[1m\u202e\nb\ud800"
    assert escape(escape(text)) == escape(text)


def test_newlines_are_escaped_unless_kept() -> None:
    text = "first\nsecond\r\nthird\x1b"
    assert escape(text) == "first\\nsecond\\r\\nthird\\x1b"
    assert escape(text, keep_newlines=True) == "first\nsecond\\r\nthird\\x1b"
    assert escape("a\u2028b", keep_newlines=True) == "a\\u2028b"


def test_clean_text_is_returned_as_is() -> None:
    text = "plain text"
    assert escape(text) is text


def test_shorten() -> None:
    assert shorten("abc", 3) == "abc"
    assert shorten("abcdef", 3) == "abc… (3 more characters)"
    assert shorten("x" * 10_003, 3) == "xxx… (10,000 more characters)"


def test_quote_strings_are_escaped_and_cut() -> None:
    assert quote("re\x1bfund") == "'re\\x1bfund'"
    long = quote("z" * 5000)
    assert long.startswith("'" + "z" * 80 + "…") and long.endswith("(4,920 more characters)'")
    assert quote("ab", limit=1) == "'a… (1 more characters)'"


def test_quote_numbers_and_other_values() -> None:
    assert quote(12) == "12"
    assert quote(-(10**399)) == "a 400-digit integer"
    assert quote(1.5) == "1.5"
    assert quote(float("nan")) == "nan"
    assert quote(True) == "True"
    assert quote(None) == "None"
    assert quote(["a\x1b"]) == "['a\\x1b']"  # repr already escapes; nothing is left raw


def test_quote_integers_beyond_the_interpreter_limit() -> None:
    limit = sys.get_int_max_str_digits()
    if limit == 0:
        pytest.skip("the interpreter has no integer string limit")
    assert quote(10 ** (limit + 10)) == "an integer too long to show"


def test_json_for_terminal_escapes_what_json_leaves_raw_and_decodes_the_same() -> None:
    import json

    from decflow.untrusted import json_for_terminal

    value = {"k\u202e": "a\x9bb\u2028c\x7f\u061c é 🙂"}
    text = json_for_terminal(json.dumps(value, ensure_ascii=False))
    assert not any(ch in text for ch in "\u202e\x9b\u2028\x7f\u061c")
    assert "é 🙂" in text and json.loads(text) == value

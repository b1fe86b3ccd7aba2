"""A credential split between the pieces of a stream (a worker's output cut every 2,000
bytes) is redacted whole: no piece shows any part of it (`redaction.StreamRedactor`)."""

from __future__ import annotations

import pytest

from decflow.redaction import MARK, StreamRedactor, register

TOKEN = "tok-0123456789abcdef-ZYXW"


@pytest.fixture(autouse=True)
def registered() -> None:
    register([TOKEN])


@pytest.mark.parametrize("cut", [1, 4, 12, len(TOKEN) - 1])
def test_a_token_cut_anywhere_comes_out_redacted_whole(cut: int) -> None:
    text = "x" * 30 + TOKEN + "y" * 10 + "\n"
    redactor = StreamRedactor()
    pieces = [redactor.feed(text[: 30 + cut]), redactor.feed(text[30 + cut:]), redactor.end()]
    assert "".join(pieces) == "x" * 30 + MARK + "y" * 10 + "\n"
    assert not any(TOKEN[:cut] in piece or TOKEN[cut:] in piece for piece in pieces)


def test_text_that_only_looks_like_a_start_is_given_out_in_the_end() -> None:
    redactor = StreamRedactor()
    assert redactor.feed("ends with tok-01") == "ends with "
    assert redactor.feed(" and more\n") == "tok-01 and more\n"
    assert redactor.feed("tok") == ""
    assert redactor.end() == "tok"


def test_a_token_over_three_pieces_and_whole_ones() -> None:
    redactor = StreamRedactor()
    shown = redactor.feed(TOKEN[:5]) + redactor.feed(TOKEN[5:9]) + redactor.feed(TOKEN[9:])
    assert shown + redactor.end() == MARK
    assert redactor.feed(f"a {TOKEN} b {TOKEN}\n") == f"a {MARK} b {MARK}\n"

"""What the `openai` backend sends, and how a sampled answer is read.

Two APIs: `chat` sends a fixed system message and a user message from the prompt template;
`completions` sends the template alone as a plain prompt, for base models (a chat model's
markup can be written into the template). The template's placeholders are `{description}`,
`{input}` and `{options}` (the options in the order and form shown, one per line). With
`options_as: letters` the options are shown as `A) refund`, `B) replace`, … and answered
with the code.

The chat system message is always sent: chat servers otherwise insert their template's
default system prompt (SmolLM2's does), so the model would see a different request.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

SYSTEM_MESSAGES = {
    "labels": (
        "You are a classifier. Read the question, the input and the options. Answer with "
        "exactly one of the options, written exactly as shown, and nothing else."
    ),
    "letters": (
        "You are a classifier. Read the question, the input and the options. Answer with "
        "the letter of exactly one option and nothing else."
    ),
}
_INSTRUCTIONS = {
    "labels": "Answer with one option, exactly as written.",
    "letters": "Answer with the letter of one option.",
}
_BODY = "Question: {description}\n\nInput:\n{input}\n\nOptions:\n{options}\n\n"


def default_prompt(api: str, options_as: str) -> str:
    """The default template; the completions one ends where the answer's first token comes."""
    prompt = _BODY + _INSTRUCTIONS[options_as]
    return prompt + "\nAnswer:" if api == "completions" else prompt


def codes(count: int) -> tuple[str, ...]:
    """Option codes A, B, C, … for `count` options (at most 26)."""
    return tuple(chr(ord("A") + i) for i in range(count))


def options_text(shown: Sequence[str], options_as: str) -> str:
    if options_as == "letters":
        return "\n".join(f"{code}) {label}" for code, label in zip(codes(len(shown)), shown,
                                                                  strict=True))
    return "\n".join(shown)


def render(template: str, *, description: str, text: str, shown: Sequence[str],
           options_as: str) -> str:
    return template.format(
        description=description, input=text, options=options_text(shown, options_as)
    )


def continuation(prompt: str, answer: str) -> str:
    """The answer as it follows the prompt: after one space unless the prompt ends with
    whitespace (`Answer:` + ` Refund`; `<|im_start|>assistant\\n` + `Refund`)."""
    return answer if not prompt or prompt[-1].isspace() else " " + answer


# -- reading sampled answers ------------------------------------------------------------------


def _normalise_answer(text: str) -> str:
    """Case-folded, punctuation removed, whitespace collapsed."""
    kept = "".join(" " if unicodedata.category(c).startswith("P") else c for c in text)
    return " ".join(kept.casefold().split())


def parse_answer(text: str, labels: Sequence[str]) -> str | None:
    """The label a sampled answer names: an exact match after stripping punctuation and
    case, else the single label it contains as whole words; None when neither applies."""
    answer = _normalise_answer(text)
    forms = {label: _normalise_answer(label) for label in labels}
    exact = [label for label, form in forms.items() if form and form == answer]
    if len(exact) == 1:
        return exact[0]
    contained = [
        label
        for label, form in forms.items()
        if form and re.search(rf"(?<!\w){re.escape(form)}(?!\w)", answer)
    ]
    return contained[0] if len(contained) == 1 else None


def parse_code(text: str, option_codes: Sequence[str]) -> str | None:
    """The option code a sampled answer gives: the answer is the code alone (any case,
    punctuation ignored: `b`, `(B)`), else the single code it contains as a standalone
    capital (`B) replace`, `The answer is B.`); a lower-case `a` inside a sentence is a
    word, not the code `A`."""
    answer = _normalise_answer(text)
    alone = [code for code in option_codes if answer == code.casefold()]
    if alone:
        return alone[0]
    found = {code for code in option_codes
             if re.search(rf"(?<![^\W_]){re.escape(code)}(?![^\W_])", text)}
    return found.pop() if len(found) == 1 else None

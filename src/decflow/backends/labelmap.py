"""`label_map` for the http-family backends, applied by meaning.

`label_map` maps backend label → contract label. Requests carry only the labels as shown,
which under `label_format` are reformatted contract labels (`REFUND`, `B) refund`,
`"refund"`, ...). DecGuard 0.1.1 mapped only shown labels that are exactly contract labels,
so every reformatted request reached a backend in names it does not speak. Here a shown
label is recognised as a contract label in one of the `label_format` styles at its shown
position, and sent as the backend's name for that label in the same style (`REFUND` →
`TRUE` for `label_map: {true: spam}`), so the backend sees the same perturbation in its
own vocabulary. Shown labels that are not recognisably one contract label (aliases, say)
are sent as shown. The answer's keys are mapped back through the same table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from decflow.backends.base import BackendError, InvalidResponse

Style = Callable[[str, int], str]


def _letter(position: int) -> str:
    return chr(ord("A") + position) if position < 26 else str(position + 1)


# The label_format styles (same order as the property); position is the shown index.
STYLES: tuple[Style, ...] = (
    lambda label, _: label.upper(),
    lambda label, _: label.lower(),
    lambda label, _: label[:1].upper() + label[1:],
    lambda label, position: f"{_letter(position)}) {label}",
    lambda label, position: f"{position + 1}. {label}",
    lambda label, _: f'"{label}"',
    lambda label, _: f"[{label}]",
)


class LabelTranslator:
    """Shown labels ⇄ the names sent to the backend, for one contract and `label_map`."""

    def __init__(self, contract_labels: Sequence[str], label_map: Mapping[str, str]) -> None:
        self._contract = tuple(contract_labels)
        self._backend_name = {target: source for source, target in label_map.items()}
        self._cache: dict[tuple[str, ...], tuple[str, ...]] = {}

    @property
    def active(self) -> bool:
        return bool(self._backend_name)

    def _translate(self, shown: str, position: int) -> str:
        if shown in self._contract:
            return self._backend_name.get(shown, shown)
        matches = {
            (label, style)
            for label in self._contract
            for style in STYLES
            if style(label, position) == shown
        }
        if len({label for label, _ in matches}) != 1:
            return shown
        label, style = next(iter(matches))
        return style(self._backend_name.get(label, label), position)

    def to_backend(self, shown: Sequence[str]) -> tuple[str, ...]:
        """The names to send, in shown order."""
        key = tuple(shown)
        if not self.active:
            return key
        sent = self._cache.get(key)
        if sent is None:
            sent = tuple(self._translate(label, i) for i, label in enumerate(key))
            if len(set(sent)) != len(sent):
                raise BackendError(
                    f"label_map sends two of the shown labels {list(key)} under one name "
                    f"({list(sent)})"
                )
            self._cache[key] = sent
        return sent

    def from_backend(
        self, answer: Mapping[str, Any], shown: Sequence[str], sent: Sequence[str]
    ) -> dict[str, Any]:
        """Re-key an answer from sent names to shown labels; unknown keys stay as they are."""
        if tuple(shown) == tuple(sent):
            return dict(answer)
        back = dict(zip(sent, shown, strict=True))
        mapped: dict[str, Any] = {}
        for key, value in answer.items():
            target = back.get(key, key)
            if target in mapped:
                raise InvalidResponse(f"answer keys map to label {target!r} twice")
            mapped[target] = value
        return mapped

"""The modes of a contract run, written once: the report sections each fills (`decflow
test`, `test --all`, `fuzz`, `stability`); the stages of a run follow from them (a stage
that judges properties `applies` only to a mode that fills them).

Every decision that depends on the mode (which requests are derived, which stages run,
what the summary judges and what a view shows) asks the run's `Mode`, never its name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from decflow.errors import DecflowError

ModeName = Literal["test", "fuzz", "all", "stability"]
# The parts of a run report a mode fills:
#   golden        the originals' metrics and failing cases
#   golden_gates  the contract's requirements and warnings checked on those metrics
#   properties    metamorphic properties (and the persona arms of `properties.counterfactual`)
#   diagnostics   the stability meter, blindness and the counterfactual verdicts
Section = Literal["golden", "golden_gates", "properties", "diagnostics"]


@dataclass(frozen=True)
class Mode:
    """What a run of this mode does. `command`: the command (and flag) that starts one;
    `reruns`: it sends the stability meter's reruns when the contract asks for them,
    `meter_by_default` even when it does not (with the meter's defaults);
    `needs_a_property`: a run without an enabled property has nothing to do."""

    name: ModeName
    command: str
    sections: tuple[Section, ...]
    reruns: bool = False
    meter_by_default: bool = False
    needs_a_property: bool = False

    def fills(self, section: Section) -> bool:
        return section in self.sections


MODES: dict[str, Mode] = {
    mode.name: mode
    for mode in (
        Mode("test", "test", ("golden", "golden_gates")),
        Mode("fuzz", "fuzz", ("properties", "diagnostics"), needs_a_property=True),
        Mode("all", "test --all", ("golden", "golden_gates", "properties", "diagnostics"),
             reruns=True),
        Mode("stability", "stability", ("golden", "diagnostics"), reruns=True,
             meter_by_default=True),
    )
}


def mode_named(name: str) -> Mode:
    """The mode called `name` (a run spec's or a run report's `mode`)."""
    try:
        return MODES[name]
    except KeyError:
        raise DecflowError(f"unknown mode '{name}' (modes: {', '.join(MODES)})") from None

"""The `sequential:` section and `backend.price_per_call` are strict decflow extensions:
wrong keys, ranges and types are errors naming the field, and leaving them out leaves the
contract hash unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from decflow.contracts.canonical import contract_hash
from decflow.contracts.parse import parse_contract
from decflow.errors import ContractError

BASE: dict[str, Any] = {
    "schema_version": "0.1",
    "decision": {"name": "spam", "type": "noul", "labels": ["spam", "ham"]},
    "backend": {"provider": "mock"},
}


def test_defaults_and_hash() -> None:
    plain = parse_contract(BASE, "c.yaml")
    assert plain.sequential is None and plain.backend.price_per_call is None
    with_section = parse_contract({**BASE, "sequential": {}}, "c.yaml")
    assert with_section.sequential is not None
    assert with_section.sequential.model_dump() == {
        "alpha": 0.05, "max_cases": None, "batch": None, "seed": None, "zero_limit": 0.02}
    assert contract_hash(with_section) != contract_hash(plain)
    priced = parse_contract({**BASE, "backend": {"provider": "mock", "price_per_call": 0.01}},
                            "c.yaml")
    assert priced.backend.price_per_call == 0.01
    assert contract_hash(priced) != contract_hash(plain)


@pytest.mark.parametrize(("section", "field"), [
    ({"sequential": {"alpha": 1.5}}, "sequential.alpha"),
    ({"sequential": {"zero_limit": 0}}, "sequential.zero_limit"),
    ({"sequential": {"batch": 0}}, "sequential.batch"),
    ({"sequential": {"max_cases": True}}, "sequential.max_cases"),
    ({"sequential": {"order": 1}}, "sequential.order"),
    ({"backend": {"provider": "mock", "price_per_call": -1}}, "backend.price_per_call"),
    ({"backend": {"provider": "mock", "price_per_call": "1"}}, "backend.price_per_call"),
])
def test_bad_values_name_the_field(section: dict[str, Any], field: str) -> None:
    with pytest.raises(ContractError) as caught:
        parse_contract({**BASE, **section}, "c.yaml")
    assert field in str(caught.value)

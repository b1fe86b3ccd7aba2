"""The Decision Contract: strict models of schema 0.1 plus decflow extensions, the loader and
the contract hash."""

from decflow.contracts.canonical import canonical_dict, canonical_json, contract_hash
from decflow.contracts.contract import DEFAULT_BACKEND, Contract
from decflow.contracts.decision import ChoiceDecision, Decision, NoulDecision, ScoreDecision
from decflow.contracts.gates import (
    REGRESSION_GATES,
    GoldenGates,
    Production,
    ProductionGates,
    Regression,
    RegressionGate,
    RegressionGates,
)
from decflow.contracts.loader import MAX_BYTES, LoadedContract, load_contract, read_document
from decflow.contracts.parse import SCHEMA_VERSION, parse_contract
from decflow.contracts.properties import (
    PROPERTIES,
    CaseSwap,
    Counterfactual,
    Inversion,
    IrrelevantContext,
    LabelFormat,
    Monotonic,
    Normalization,
    OptionOrder,
    Paraphrase,
    PropertyConfig,
    PropertyEntry,
    PropertySet,
    RepeatedContext,
    Whitespace,
)
from decflow.contracts.providers import (
    BackendConfig,
    HttpSettings,
    MockSettings,
    OpenAISettings,
    SystemOneSettings,
)
from decflow.contracts.sections import Diagnostics, Evaluation, Fuzz, Policy, Route

__all__ = [
    "DEFAULT_BACKEND",
    "MAX_BYTES",
    "PROPERTIES",
    "REGRESSION_GATES",
    "SCHEMA_VERSION",
    "BackendConfig",
    "CaseSwap",
    "ChoiceDecision",
    "Contract",
    "Counterfactual",
    "Decision",
    "Diagnostics",
    "Evaluation",
    "Fuzz",
    "GoldenGates",
    "HttpSettings",
    "Inversion",
    "IrrelevantContext",
    "LabelFormat",
    "LoadedContract",
    "MockSettings",
    "Monotonic",
    "Normalization",
    "NoulDecision",
    "OpenAISettings",
    "OptionOrder",
    "Paraphrase",
    "Policy",
    "Production",
    "ProductionGates",
    "PropertyConfig",
    "PropertyEntry",
    "PropertySet",
    "Regression",
    "RegressionGate",
    "RegressionGates",
    "RepeatedContext",
    "Route",
    "ScoreDecision",
    "SystemOneSettings",
    "Whitespace",
    "canonical_dict",
    "canonical_json",
    "contract_hash",
    "load_contract",
    "parse_contract",
    "read_document",
]

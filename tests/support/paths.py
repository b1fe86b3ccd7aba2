"""Where the tests' files are, named once for every test group."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
REFERENCE = FIXTURES / "reference"
EXAMPLES = REFERENCE / "decguard-examples"
VECTORS = REFERENCE / "decguard-vectors"

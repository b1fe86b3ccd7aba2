"""`python -m tests.support.extended_cli ARGS`: decflow's command line with the test-only
extensions of `tests.support.extensions` registered first."""

from tests.support import extensions

extensions.register()

from decflow.cli import main  # noqa: E402  (registered before the CLI reads a registry)

main()

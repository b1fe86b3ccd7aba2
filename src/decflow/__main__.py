"""`python -m decflow` and the `decflow` command.

The signal handlers are installed before the command line is imported (typer, pydantic:
a fifth of a second), so a Ctrl-C or SIGTERM at any point ends the command with one line
and exit 130 or 143, never a KeyboardInterrupt traceback. Before that, the cyclic garbage
collector is held off until the first stage (`decflow.startup`).
"""

import sys


def main() -> None:
    from decflow import startup

    startup.begin()
    from decflow.errors import Interrupted
    from decflow.interrupts import install

    install()
    try:
        from decflow.cli import main as command
    except Interrupted as exc:
        sys.stderr.write("error: interrupted\n")
        sys.exit(128 + exc.signum)
    command()


# guarded: worker processes started by `spawn` import this module again
if __name__ == "__main__":
    main()

"""`python -m decflow`."""

from decflow.cli import main

# guarded: worker processes started by `spawn` import this module again
if __name__ == "__main__":
    main()

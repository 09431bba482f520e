"""``python -m simdb_cli``: the same command as the ``simdb`` console script."""

from .app import main

if __name__ == "__main__":  # not when a spawned process imports the parent's main module
    main()

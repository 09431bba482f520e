"""``python -m simdb_cli``: the same command as the ``simdb`` console script."""

from .app import main

main()

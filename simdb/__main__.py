"""``python -m simdb``: the ``simdb`` command line, as ``python -m simdb_cli`` runs it.

Only running the package this way loads the command line (and typer); ``import simdb``
never does."""

from simdb_cli.app import main

main()

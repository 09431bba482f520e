"""``python -m simdb``: the ``simdb`` command line, as ``python -m simdb_cli`` runs it.

Only running the package this way loads the command line (and typer); ``import simdb``
never does."""

import runpy

# By name: the command line is a package of its own (simdb_cli), which the library never imports.
runpy.run_module("simdb_cli", run_name="__main__")

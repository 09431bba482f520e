"""The ``simdb`` command line: a thin typer layer over the :mod:`simdb` library.

Everything that imports typer or rich lives in this package, so ``import simdb`` stays free
of them.  The entry point is :func:`cli.app.main`.
"""

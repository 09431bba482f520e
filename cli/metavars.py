"""The placeholders of ``--help`` (``--db PATH``, ``-k N``, ``[TEXT]``), in one place.

typer shows a parameter's Python type where a CLI shows a placeholder (``<int range>``,
``<list[str]>``).  :class:`SimdbGroup`, the group class of the ``simdb`` app, gives every
parameter that names no ``metavar`` one as the commands are built: by its option name where
one reads better (:data:`BY_OPTION`), else by its type (:data:`BY_TYPE`); an argument shows
as its name in capitals, without its Python type.  Cost: one pass over the parameters per build of the command.
"""

from __future__ import annotations

import sys
import types
import typing
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup

from .output import CONTROL_ESCAPES, err

#: Placeholders by option name, for the options whose value is more than its type.
BY_OPTION = {
    "--db": "PATH",
    "--file": "FILE",
    "--files-from": "FILE",
    "--jsonl": "FILE",
    "--fingerprints": "FILE",
    "--output": "FILE",
    "--fingerprint": "HEX",
    "--dir": "DIR",
    "--out": "DIR",
    "--key-base": "DIR",
    "--parquet": "PATH",
    "--glob": "PATTERN",
    "--exclude": "PATTERN",
    "--scheduler": "ADDRESS",
    "--encoding": "ENC",
    "--features": "NAME",
    "--kind": "KIND",
    "--weights": "WEIGHTS",
    "--stopwords": "LANG",
    "--format": "FORMAT",
    "--id-field": "FIELD",
    "--text-field": "FIELD",
    "--max-doc-bytes": "BYTES",
    "--prefix": "PREFIX",
    "--sort": "ORDER",
    "--bits": "BITS",
}
#: Placeholders by the value's Python type, for everything else.
BY_TYPE: dict[Any, str] = {int: "N", float: "FLOAT", str: "TEXT"}
#: The Python type of a click type, by the start of its name ("integer", "int range", ...),
#: where typer keeps no annotation.
CLICK_TYPE_NAMES = (("int", int), ("float", float), ("bool", bool))


def _value_type(annotation: Any) -> Any:
    """The type of one value of a parameter annotated ``annotation``: ``int`` for ``int``,
    ``int | None`` or ``list[int]``."""
    origin = typing.get_origin(annotation)
    arguments = [part for part in typing.get_args(annotation) if part is not type(None)]
    if origin in (typing.Union, types.UnionType, list) and len(arguments) == 1:
        return _value_type(arguments[0])
    return annotation


def placeholder(param: Any) -> str | None:
    """The placeholder of one typer parameter, or None for a flag (it takes no value)."""
    descriptor = getattr(param, "type_descriptor", None)  # typer's record of the annotation (0.29+)
    if descriptor is not None:
        annotation = descriptor.annotation
    else:  # older typer: the click type, which names itself ("integer range" and so on)
        type_name = str(getattr(getattr(param, "type", None), "name", ""))
        annotation = next((kind for prefix, kind in CLICK_TYPE_NAMES if type_name.startswith(prefix)), str)
    if param.param_type_name == "argument":  # typer adds the brackets and the "..." itself
        return str(param.name).upper()
    if getattr(param, "is_flag", False) or _value_type(annotation) is bool:
        return None
    for option in param.opts:
        if option in BY_OPTION:
            return BY_OPTION[option]
    return BY_TYPE.get(_value_type(annotation), "VALUE")


# click's classes, from the copy of click that typer uses (its own from typer 0.28 on).
_USAGE_ERROR: type[Any] = next(cls for cls in typer.BadParameter.__mro__ if cls.__name__ == "UsageError")
_CLICK_EXCEPTION: type[Any] = next(cls for cls in typer.BadParameter.__mro__ if cls.__name__ == "ClickException")


def _given_value(args: list[str], param: Any) -> str | None:
    """The value given on the command line ``args`` to the option ``param`` of a usage error
    (the last one, as click takes the last), or None for an argument, a flag or a value not
    found.  O(len(args))."""
    if param is None or getattr(param, "param_type_name", None) != "option" or getattr(param, "is_flag", False):
        return None
    given = None
    for position, arg in enumerate(args):
        for name in param.opts:
            if arg == name and position + 1 < len(args):
                given = args[position + 1]
            elif name.startswith("--") and arg.startswith(name + "="):
                given = arg[len(name) + 1 :]
            elif not name.startswith("--") and arg.startswith(name) and len(arg) > len(name):
                given = arg[len(name) :]  # -k99
    return given


class SimdbGroup(TyperGroup):
    """typer's group, with CLI placeholders for its own and its commands' parameters, and
    click's own usage errors (an unknown option, a value of the wrong type) in simdb's one
    line instead of click's four."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        def run() -> Any:
            return super(SimdbGroup, self).main(
                args, prog_name, complete_var, False, windows_expand_args=windows_expand_args, **extra
            )

        if not standalone_mode:
            return run()
        try:
            code = run()
        except _USAGE_ERROR as error:
            if error.ctx is None:  # click names no command for some option errors
                hint = "simdb COMMAND -h lists a command's options"
            elif error.ctx.command is self:
                hint = "simdb -h lists the commands"
            else:
                hint = f"{error.ctx.command_path} -h lists the options"
            # One line, and the user's value in it escaped as every message escapes it.
            message = " ".join(error.format_message().split()).translate(CONTROL_ESCAPES)
            given = _given_value(sys.argv[1:] if args is None else list(args), getattr(error, "param", None))
            if given is not None and given not in message:  # typer's range errors leave the value out
                message += f" (given: {given})".translate(CONTROL_ESCAPES)
            err(f"simdb: {message} (hint: {hint})")
            sys.exit(error.exit_code)
        except _CLICK_EXCEPTION as error:
            error.show()
            sys.exit(error.exit_code)
        except typer.Abort:
            err("Aborted!")
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for command in [self, *self.commands.values()]:
            for param in command.params:
                if param.metavar is None:
                    param.metavar = placeholder(param)
                if param.param_type_name == "argument":
                    # typer lists an argument with its Python type ("TEXT <str>"); its
                    # placeholder says enough.
                    param.display_type_rich = _no_type  # type: ignore[attr-defined]


def _no_type(ctx: Any) -> None:
    return None

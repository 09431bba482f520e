"""The command-line reference (docs/cli.md), generated from the CLI itself.

    python -m simdb_cli.reference > docs/cli.md

Walks typer's click command tree (``typer.main.get_command``) and renders every command,
argument and option (names, metavar, default, environment variable, range, help) as
Markdown.  The output depends only on the command definitions: no terminal width, no
colours, and no wording that differs between typer versions (typer's own help renderer
names types differently from one release to the next), so ``tests/test_docs.py`` can
require docs/cli.md to equal it byte for byte.  Cost: imports the CLI, O(options).
"""

from __future__ import annotations

import inspect
import sys
import typing
from typing import Any

import typer

from .app import app

#: The command that rewrites docs/cli.md; the test that checks it names this in its message.
REGENERATE = "python -m simdb_cli.reference > docs/cli.md"


def _value_kind(param: Any) -> str:
    """INTEGER, NUMBER or TEXT: what an option's value is, from its Python annotation
    (typer >= 0.26 keeps it) or else click's parameter type (earlier typer)."""
    descriptor = getattr(param, "type_descriptor", None)
    annotation = getattr(descriptor, "annotation", None)
    if annotation is not None:
        # Optional[int], list[str], ... : the type of one value.
        inner = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        while inner and typing.get_args(inner[0]):
            inner = [arg for arg in typing.get_args(inner[0]) if arg is not type(None)]
        base = inner[0] if inner else annotation
        if base is int:
            return "INTEGER"
        if base is float:
            return "NUMBER"
        return "TEXT"
    name = getattr(getattr(param, "type", None), "name", "text")
    if name.startswith(("integer", "int")):  # "integer range" in click, "int range" in typer 0.27
        return "INTEGER"
    if name.startswith("float"):
        return "NUMBER"
    return "TEXT"


def _value_range(param: Any) -> str:
    """'>= 1', '0 to 1', or '' when the value is not limited to a range."""
    low = getattr(param, "min", None)
    high = getattr(param, "max", None)
    if low is None and high is None:  # earlier typer keeps the range on click's type
        low = getattr(getattr(param, "type", None), "min", None)
        high = getattr(getattr(param, "type", None), "max", None)
    if low is not None and high is not None:
        return f"{low} to {high}"
    if low is not None:
        return f">= {low}"
    if high is not None:
        return f"<= {high}"
    return ""


def _is_repeatable(param: Any) -> bool:
    if getattr(param, "multiple", False):
        return True
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    return typing.get_origin(annotation) is list


def _option_line(param: Any) -> str:
    """One option as a Markdown list item: names and metavar, then its help and facts."""
    names = sorted(param.opts, key=lambda name: (name.startswith("--"), name))  # -t before --threshold
    flag = bool(getattr(param, "is_flag", False))
    if flag:
        usage = ", ".join(names) + "".join(f" / {name}" for name in param.secondary_opts)
    else:
        usage = ", ".join(names) + " " + (param.metavar or _value_kind(param))
    facts = []
    if flag and param.secondary_opts:
        facts.append(f"default: {names[-1] if param.default else param.secondary_opts[0]}")
    elif not flag and param.default is not None and param.default != ():
        facts.append(f"default: {param.default}")
    if param.envvar:
        facts.append(f"env: {param.envvar}")
    value_range = _value_range(param)
    if value_range:
        facts.append(f"range: {value_range}")
    if _is_repeatable(param):
        facts.append("repeatable")
    if param.required:
        facts.append("required")
    help_text = " ".join((param.help or "").split())
    return f"- `{usage}`: {help_text}" + (f" ({'; '.join(facts)})" if facts else "")


def _argument_usage(param: Any) -> str:
    name = (param.metavar or param.name).upper()
    if param.nargs == -1:
        name += "..."
    return name if param.required else f"[{name}]"


def _argument_line(param: Any) -> str:
    help_text = " ".join((getattr(param, "help", None) or "").split())
    return f"- `{_argument_usage(param)}`: {help_text}"


def _command_section(name: str, command: Any) -> list[str]:
    arguments = [p for p in command.params if p.param_type_name == "argument" and not p.hidden]
    options = [p for p in command.params if p.param_type_name == "option" and not p.hidden]
    usage = " ".join(["simdb", name, "[OPTIONS]", *(_argument_usage(p) for p in arguments)])
    lines = [f"## simdb {name}", "", f"`{usage}`", "", inspect.cleandoc(command.help or ""), ""]
    if arguments:
        lines += ["Arguments:", "", *(_argument_line(p) for p in arguments), ""]
    lines += ["Options:", "", *(_option_line(p) for p in options), "- `-h, --help`: Show the help and exit.", ""]
    if command.epilog:
        lines += [inspect.cleandoc(command.epilog), ""]
    return lines


def render() -> str:
    """The whole reference as Markdown text, one section per command in the order ``simdb
    --help`` lists them."""
    # Any: typer >= 0.26 returns its vendored click's group, earlier typer click's own.
    group: Any = typer.main.get_command(app)
    context = group.context_class(group, info_name="simdb")  # click's or typer's vendored click's
    lines = [
        "# Command-line reference",
        "",
        "<!-- Generated by `" + REGENERATE + "`; do not edit by hand. -->",
        "",
        "Every command and option of `simdb`, generated from the command line itself"
        " (`" + REGENERATE + "`); `tests/test_docs.py` fails when this file is out of date."
        " `simdb COMMAND --help` prints the same help.",
        "",
        "`simdb [OPTIONS] COMMAND [OPTIONS] ...`",
        "",
        inspect.cleandoc(group.help or ""),
        "",
        "Options before the command:",
        "",
        *(_option_line(p) for p in group.params if p.param_type_name == "option" and not p.hidden),
        "- `-h, --help`: Show the help and exit.",
        "",
        "Commands: " + ", ".join(f"[{name}](#simdb-{name})" for name in group.list_commands(context)) + ".",
        "",
    ]
    for name in group.list_commands(context):
        lines += _command_section(name, group.get_command(context, name))
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> None:
    """Print the reference on stdout."""
    sys.stdout.write(render())


if __name__ == "__main__":
    main()

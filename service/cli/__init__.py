"""The ``annoplan`` command line: serve, a job worker, migrate, keys, offline plans and simulations, a demo,
annotation tools, certificate checks; a module per command group, the app put together here."""

from __future__ import annotations

import sys

import typer

from service.cli import annotation_tools, demo, imports, keys, offline, server, verify
from service.cli.common import CliError

app = typer.Typer(
    help="annoplan: plan and check the human overlap that validates an LLM judge.",
    no_args_is_help=True,
    add_completion=False,
)

for command in (server.serve, server.worker, server.migrate, offline.plan, offline.simulate, demo.demo, verify.verify):
    app.command()(command)
app.command("import")(imports.import_file)
app.add_typer(keys.keys, name="keys")
app.add_typer(annotation_tools.sync, name="sync")
app.add_typer(annotation_tools.connect, name="connect")


def main() -> None:
    """Entry point of the ``annoplan`` script: errors a person can fix are one line, no traceback."""
    args = sys.argv[1:]
    if not args:
        app(args)  # prints the help
    try:
        code = app(args, standalone_mode=False)  # without standalone mode click returns typer.Exit's code
    except CliError as e:
        _fail(str(e))
    except typer.Abort:
        _fail("aborted")
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.TyperException as e:  # a usage error: unknown option, bad value, missing file
        _fail(e.format_message(), hint="add --help for the options")
    except (OSError, ValueError) as e:
        _fail(str(e))
    if isinstance(code, int) and code:
        sys.exit(code)


def _fail(message: str, *, hint: str | None = None) -> None:
    """Print ``annoplan: error: message`` (and a hint) on stderr and exit 1."""
    typer.echo(f"annoplan: error: {message}" + (f" ({hint})" if hint else ""), err=True)
    sys.exit(1 if hint is None else 2)

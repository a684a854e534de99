"""The ``bench`` command line (typer): the app with one module per command or command group
under :mod:`bench.cli`, and :func:`main`, the console script's entry point."""

from __future__ import annotations

import atexit
import signal
import sys

import typer

from bench.cli import (check, compare, doctor, gate, imports, init, labels, lint, merge,
                       optimize, report, run, show, split, stops, synth, traces, variants)
from bench.cli.output import fail
from bench.errors import BenchError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Benchmark LLM tool descriptions: tool selection, arguments and token "
                       "cost per description variant and provider.")


def _register(typer_app: typer.Typer) -> None:
    """Add every command and command group to ``typer_app``, in the order ``bench --help``
    lists them."""
    for command in (run.run, doctor.doctor, show.show, merge.merge, compare.compare,
                    lint.lint, split.split, check.check, init.init, synth.synth, synth.review,
                    traces.traces, report.report):
        typer_app.command()(command)
    for group, name in ((variants.variants_app, "variants"), (imports.import_app, "import"),
                        (gate.baseline_app, "baseline"), (labels.labels_app, "labels"),
                        (optimize.optimize_app, "optimize")):
        typer_app.add_typer(group, name=name)


def _unwrap_docstrings(typer_app: typer.Typer) -> None:
    """Give each command's help its docstring with each paragraph on one line: rich keeps a
    docstring's line breaks and wraps again, which cut sentences mid-line in ``--help``."""
    import inspect
    for command in typer_app.registered_commands:
        if command.help is None and command.callback is not None and command.callback.__doc__:
            paragraphs = inspect.cleandoc(command.callback.__doc__).split("\n\n")
            command.help = "\n\n".join(" ".join(p.split()) for p in paragraphs)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _unwrap_docstrings(group.typer_instance)


_register(app)
_unwrap_docstrings(app)


def main() -> None:
    """Console-script entry point.

    Exit codes: 0 done; 2 bad input (one ``error:`` line naming file, line and field, or a
    usage error from the CLI parser); 3 an incomplete, resumable run (a budget reached, or a
    provider skipped: status ``partial``; one line says which); 130 interrupted (Ctrl-C); 143
    terminated (SIGTERM, e.g. a CI job's timeout); 141 the reader of the output went away
    (``bench compare ... | head``: 128 + SIGPIPE, as a shell reports it). Both stops (130, 143)
    end a run the same way: finished rows are kept, the manifest says ``interrupted``, and
    ``bench run --resume`` continues. Bad input never shows a
    traceback.
    """
    signal.signal(signal.SIGTERM, stops.terminate)
    # Ctrl-C raises KeyboardInterrupt even when bench inherited SIGINT ignored (a shell
    # script's `bench ... &`): Python and asyncio.run then leave it ignored, so only the
    # run loop, which installs its own handler, stopped on it
    signal.signal(signal.SIGINT, signal.default_int_handler)
    atexit.register(stops.ignore_stop_signals)
    from bench.redact import RedactingStream
    if not isinstance(sys.stderr, RedactingStream):  # every message, from bench or a library
        sys.stdout, sys.stderr = RedactingStream(sys.stdout), RedactingStream(sys.stderr)
    # typer 0.29 vendors click as typer._click (typer.core uses it); older typer uses click
    click = getattr(typer.core, "_click", None) or __import__("click")
    try:
        # not standalone: usage errors come here and are said in one line like every other
        # error (typer's standalone mode draws a multi-line box)
        code = app(prog_name="bench", standalone_mode=False)
        # typer's silent exit for a KeyboardInterrupt
        if code == 130 and stops.stop_code() is None:
            stops.fail_stopped()
        sys.exit(code if isinstance(code, int) and not isinstance(code, bool) else 0)
    except click.exceptions.NoArgsIsHelpError as exc:  # `bench` or `bench variants` alone
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
        sys.exit(2)
    except click.exceptions.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "bench"
        fail(f"{command}: {exc.format_message()} (see {command} --help)", 2)
    except click.exceptions.ClickException as exc:
        fail(exc.format_message(), exc.exit_code)
    except typer.Abort:  # end of input at a prompt
        stops.fail_stopped()
    except BenchError as exc:
        fail(str(exc), exc.exit_code)
    except OSError as exc:  # unreadable or unwritable files and folders
        where = f"{exc.filename}: " if exc.filename else ""
        fail(f"{where}{exc.strerror or exc}", 2)
    except KeyboardInterrupt:
        stops.fail_stopped()
    finally:
        # Everything is written and said. A signal while the interpreter joins worker threads
        # exits at once with the stop's code (it used to end the process by SIGINT, exit -2).
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, stops.exit_at_once)


if __name__ == "__main__":
    main()

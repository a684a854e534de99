"""``python -m bench`` and the ``bench`` console script: the CLI, imported with the cyclic
collector paused (importing makes objects that live as long as the command; the run command's
own setting is in :mod:`bench.collector`)."""

import gc


def main() -> None:
    """Import the CLI without collections, then run it (:func:`bench.cli.main`)."""
    gc.disable()
    try:
        from bench.cli import main as cli_main
    finally:
        gc.enable()
    cli_main()


if __name__ == "__main__":
    main()

"""``python -m bench`` runs the CLI."""

from bench.cli import main

main()

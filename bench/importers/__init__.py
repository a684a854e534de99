"""Importers: turn other formats (BFCL, OpenAI/Anthropic tool lists, a live MCP server) into
bench toolsets (hand-written variants) and, for BFCL, labeled datasets.

Each importer returns plain data (:class:`~bench.importers.common.ImportedToolset`, cases as
dicts); :mod:`bench.importers.common` writes them atomically under ``descriptions/`` and
``datasets/``.
"""

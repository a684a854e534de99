"""Safe YAML loading that can say on which line a field sits (for one-line error messages)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import yaml

from bench.errors import BenchError, read_text_file


def load_yaml(path: Path) -> tuple[Any, yaml.Node | None]:
    """Load ``path`` with ``yaml.safe_load`` semantics and also return its node tree.

    Returns:
        (data, root node) where the node tree is used by :func:`line_of` to locate fields.

    Raises:
        BenchError: the file is missing or is not valid YAML (with the line of the problem).
    """
    text = read_text_file(path)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise BenchError(f"invalid YAML: {problem}", file=path, line=line) from None
    return data, node


def line_of(node: yaml.Node | None, path: Sequence[str | int]) -> int | None:
    """Return the 1-based line of the deepest node reachable along ``path`` (keys / indexes)."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in path:
        if isinstance(node, yaml.MappingNode):
            found = None
            for key_node, value_node in node.value:
                if key_node.value == str(key):
                    found = value_node
                    line = key_node.start_mark.line + 1
                    break
            if found is None:
                return line
            node = found
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line
    return line

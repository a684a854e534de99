"""Safe YAML loading that can say on which line a field sits (for one-line error messages)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import yaml

from bench.errors import BenchError, read_text_file


#: libyaml's parser when PyYAML was built with it (same safe tags and node tree as
#: ``yaml.SafeLoader``, about 20 times faster on the shipped specs), else the pure Python one
_SAFE_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_EXPANDED_NODES = 1_000_000  # far above any spec or pricing file; an alias bomb is far above


def expanded_size(node: yaml.Node | None) -> int:
    """How many nodes ``node``'s tree holds once every alias is expanded (an alias shares its
    anchor's node, so a few lines of nested aliases can stand for billions of values: the
    "billion laughs" attack). Linear in the composed tree: each distinct node is sized once.

    Raises:
        RecursiveAlias: a node contains itself (``x: &a [*a]``: PyYAML composes an anchor's
            node before its children, so an alias inside it is the node itself).
    """
    if node is None:
        return 0
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # on the current path (depth-first, iterative)
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        current, children_done = stack.pop()
        if id(current) in sizes:
            continue
        if isinstance(current, yaml.MappingNode):
            children = [child for pair in current.value for child in pair]
        elif isinstance(current, yaml.SequenceNode):
            children = list(current.value)
        else:
            sizes[id(current)] = 1
            continue
        if children_done:
            open_nodes.discard(id(current))
            sizes[id(current)] = 1 + sum(sizes.get(id(child), 0) for child in children)
        elif id(current) in open_nodes:  # reached again below itself
            raise RecursiveAlias(current.start_mark.line + 1)
        else:
            open_nodes.add(id(current))
            stack.append((current, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(node)]


class RecursiveAlias(ValueError):
    """A YAML node that contains itself through an alias; ``line`` is its 1-based line."""

    def __init__(self, line: int) -> None:
        super().__init__(f"a YAML alias refers to the node that contains it (line {line})")
        self.line = line


def load_yaml(path: Path) -> tuple[Any, yaml.Node | None]:
    """Load ``path`` with ``yaml.safe_load`` semantics and also return its node tree.

    Returns:
        (data, root node) where the node tree is used by :func:`line_of` to locate fields.

    Raises:
        BenchError: the file is missing, is not valid YAML (with the line of the problem),
            its aliases expand to more than :data:`MAX_EXPANDED_NODES` values or refer to
            the node that contains them, or it is nested deeper than Python's recursion limit.
    """
    text = read_text_file(path)
    try:
        # one parse: the data is constructed from the node tree composed for the size check
        loader = _SAFE_LOADER(text)
        try:
            node = loader.get_single_node()
            if expanded_size(node) > MAX_EXPANDED_NODES:
                raise BenchError(f"YAML aliases expand to more than {MAX_EXPANDED_NODES:,} "
                                 "values (an alias bomb?); write the values out", file=path)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except RecursiveAlias as recursive:
        raise BenchError("invalid YAML: an alias refers to the node that contains it (a "
                         "recursive alias); write the values out", file=path,
                         line=recursive.line) from None
    except RecursionError:
        raise BenchError("invalid YAML: nested deeper than Python's recursion limit",
                         file=path) from None
    except yaml.YAMLError as first:
        # the pure Python parser's message is the more precise one (it names the undefined
        # alias, the character, what it expected): worth a second parse of a broken file
        exc: yaml.YAMLError = first
        if _SAFE_LOADER is not yaml.SafeLoader:
            try:
                yaml.compose(text, Loader=yaml.SafeLoader)
            except yaml.YAMLError as precise:
                exc = precise
            except RecursionError:  # deeper than the pure Python composer goes: keep the first
                pass
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

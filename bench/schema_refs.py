"""``$ref`` checks for tool input schemas: every reference must resolve inside the tool's own
schema (bench never fetches a schema from the network, and the JSON Schema validators it uses
have no other schema registered), and a chain of references must not lead back to itself (a
validator would recurse forever). See JSON Schema 2020-12 Core, section 8.2.3 ("Schema
References"), and the ``referencing`` library, which jsonschema resolves references with.

Also the nesting limit (:func:`depth_problem`), checked before jsonschema's metaschema check,
which recurses per level.
"""

from __future__ import annotations

from typing import Any

from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

#: The deepest input schema bench loads, in nested JSON objects and arrays (a schema
#: level with ``properties`` is two). Checking a schema against the 2020-12 metaschema takes
#: about ten Python frames per schema level, so near 90 levels exhaust the default recursion
#: limit of 1,000; 64 containers (32 levels of nested objects) is far beyond any tool's
#: arguments (bench's parser drops arguments nested deeper than 64 levels:
#: :data:`bench.parse.MAX_ARGUMENT_DEPTH`).
MAX_SCHEMA_DEPTH = 64


def container_depth(value: Any) -> int:
    """How deeply JSON objects and arrays nest in ``value`` (0 for a scalar, 1 for ``{}``);
    iterative, so any depth is measured without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def depth_problem(schema: Any) -> str | None:
    """Why ``schema`` is nested too deeply to check (deeper than :data:`MAX_SCHEMA_DEPTH`
    containers), or None; checked before jsonschema's metaschema check, which would otherwise
    end in a RecursionError."""
    if container_depth(schema) <= MAX_SCHEMA_DEPTH:
        return None
    return (f"the input schema is nested deeper than {MAX_SCHEMA_DEPTH} levels of objects and "
            "arrays (bench's limit; the JSON Schema checks would exhaust Python's recursion "
            "limit)")


# Keywords whose values are data, not subschemas: a "$ref" key inside them is not a reference.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})


def ref_problem(schema: Any) -> tuple[list[str | int], str] | None:
    """The first ``$ref`` of ``schema`` that does not resolve inside it, or whose chain of
    references loops, as (path of the ``$ref`` keyword, why); None when all resolve.

    Subschemas with their own ``$id`` (another base URI) are not checked.
    """
    if not isinstance(schema, dict):
        return None
    resource = DRAFT202012.create_resource(schema)
    base = resource.id() or ""
    resolver = Registry().with_resource(base, resource).resolver(base_uri=base)
    return _walk(schema, [], resolver, root=True)


def _walk(node: Any, path: list[str | int], resolver: Any, *, root: bool = False
          ) -> tuple[list[str | int], str] | None:
    if isinstance(node, list):
        for index, item in enumerate(node):
            found = _walk(item, [*path, index], resolver)
            if found:
                return found
        return None
    if not isinstance(node, dict) or (not root and "$id" in node):
        return None
    ref = node.get("$ref")
    if isinstance(ref, str):
        why = _chain_problem(ref, resolver)
        if why:
            return [*path, "$ref"], why
    for key, value in node.items():
        if key not in _DATA_KEYWORDS:
            found = _walk(value, [*path, key], resolver)
            if found:
                return found
    return None


def _chain_problem(ref: str, resolver: Any) -> str | None:
    seen: set[int] = set()
    while True:
        try:
            resolved = resolver.lookup(ref)
        except Unresolvable:
            return (f"$ref '{ref}' does not resolve inside the tool's schema (bench resolves "
                    "only references into the schema itself, e.g. '#/$defs/Name')")
        key = id(resolved.contents)
        if key in seen:
            return f"$ref '{ref}' leads back to itself through references only"
        seen.add(key)
        target = resolved.contents
        if not isinstance(target, dict) or not isinstance(target.get("$ref"), str):
            return None
        ref, resolver = target["$ref"], resolved.resolver

"""Tool specs, templates and description variants."""

from bench.descriptions.variants import (LINE_TARGETS, Variant, available_variants,
                                         check_toolset, load_variant)
from bench.limits import DEFAULT_VARIANTS

__all__ = ["DEFAULT_VARIANTS", "LINE_TARGETS", "Variant", "available_variants",
           "check_toolset", "load_variant"]

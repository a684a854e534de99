"""Tool specs, templates and description variants."""

from bench.descriptions.variants import (DEFAULT_VARIANTS, LINE_TARGETS, Variant,
                                         available_variants, load_variant)

__all__ = ["DEFAULT_VARIANTS", "LINE_TARGETS", "Variant", "available_variants", "load_variant"]

"""``bench optimize``: rewrite tool descriptions from the target's failures on ``dev`` and
keep only what the held-out ``test`` split confirms (:func:`optimize`; ``docs/optimize.md``).
"""

from bench.optimize.config import OptimizeConfig
from bench.optimize.core import Optimization, optimize

__all__ = ["Optimization", "OptimizeConfig", "optimize"]

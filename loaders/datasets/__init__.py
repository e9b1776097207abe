"""Stand-ins for the peers' dataset objects over a store: PyG ``Data``-like views, OGB and
OGB-LSC datasets and their evaluators, and synthetic stores for tests and benchmarks.

The names here are those of :mod:`loaders.datasets.views` and PyG's ``Planetoid``
(:mod:`loaders.datasets.planetoid`); OGB-LSC's in
:mod:`loaders.datasets.lsc`, ranking metrics against fixed negatives (OGB's link evaluators) in
:mod:`loaders.datasets.ranking`, synthetic stores in :mod:`loaders.datasets.synthetic`.
"""

from loaders.datasets.planetoid import Planetoid, Reddit
from loaders.datasets.views import *  # noqa: F401,F403
from loaders.datasets.views import __all__ as _views

__all__ = [*_views, "Planetoid", "Reddit"]

"""Out-of-core graph feature store: a zarr v3 format, fast row gathers, and its writer."""

__version__ = "0.1.0"

from . import threading_layer as _threading_layer

_threading_layer.choose()  # before any parallel kernel runs (featurestore.threading_layer)

from . import forksafe as _forksafe  # noqa: E402

_forksafe.install()  # a forked child leaves its parent's remote connections alone

from .errors import *  # noqa: F401,F403,E402
from .errors import __all__ as _errors_all  # noqa: E402
from .format import EdgeType  # noqa: E402
from .validate import check_ids, check_out, first_out_of_range  # noqa: E402
from .reader import FeatureArray, Store, open_store  # noqa: E402
from .writer import StoreWriter, create_store, iter_blocks  # noqa: E402

__all__ = ["open_store", "create_store", "Store", "StoreWriter", "FeatureArray", "EdgeType",
           "iter_blocks", "check_ids", "check_out", "first_out_of_range", *_errors_all]

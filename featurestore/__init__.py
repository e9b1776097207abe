"""Out-of-core graph feature store: a zarr v3 format, fast row gathers, and its writer."""

from featurestore.version import __version__  # noqa: F401

from featurestore import threading_layer as _threading_layer

_threading_layer.choose()  # before any parallel kernel runs (featurestore.threading_layer)

from featurestore.remote import forksafe as _forksafe  # noqa: E402

_forksafe.install()  # a forked child leaves its parent's remote connections alone

from featurestore.errors import *  # noqa: F401,F403,E402
from featurestore.errors import __all__ as _errors_all  # noqa: E402
from featurestore.format.names import EdgeType  # noqa: E402
from featurestore.rows.validate import check_ids, check_out, first_out_of_range  # noqa: E402
from featurestore.store import FeatureArray, Store, open_store  # noqa: E402
from featurestore.writer import StoreWriter, create_store, iter_blocks  # noqa: E402


from featurestore.moved import alias_modules as _alias_modules  # noqa: E402

# the 0.1 layout's module paths, importable until 0.3 (README, "Layout")
_alias_modules("featurestore", {
    "forksafe": "featurestore.remote.forksafe", "location": "featurestore.remote.location",
    "lock": "featurestore.remote.lock", "loopback": "featurestore.testing.loopback",
    "rangecache": "featurestore.remote.rangecache", "reader": "featurestore.store",
    "replicate": "featurestore.remote.replicate", "rowfile": "featurestore.format.rowfile",
    "schema": "featurestore.format.schema", "validate": "featurestore.rows.validate",
})

__all__ = ["open_store", "create_store", "Store", "StoreWriter", "FeatureArray", "EdgeType",
           "iter_blocks", "check_ids", "check_out", "first_out_of_range", *_errors_all]

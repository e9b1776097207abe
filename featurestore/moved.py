"""Old module paths of the 0.1 layout, kept importable (until 0.3) as aliases of the new ones.

``alias_modules("loaders", {"sampler": "loaders.sample.sampler"})`` makes
``import loaders.sampler`` (and ``from loaders.sampler import X``) return the module
``loaders.sample.sampler`` itself, not a copy: monkeypatching either name patches both.
The new module is imported only when the old name is.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys

__all__ = ["alias_modules"]


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A meta-path finder that answers each old name with the module at its new path."""

    def __init__(self, mapping: dict[str, str]):
        self.mapping = dict(mapping)
        self.specs = {}

    def find_spec(self, fullname, path=None, target=None):  # noqa: D102
        if fullname in self.mapping:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec):  # noqa: D102
        module = importlib.import_module(self.mapping[spec.name])
        self.specs[spec.name] = module.__spec__  # the import system sets the alias's next
        return module

    def exec_module(self, module):  # noqa: D102
        # already executed under its new name: keep its own spec
        module.__spec__ = self.specs[module.__spec__.name]


def alias_modules(package: str, moved: dict[str, str]) -> None:
    """Make ``package.OLD`` importable as the module ``NEW`` for each ``OLD: NEW`` of ``moved``."""
    mapping = {f"{package}.{old}": new for old, new in moved.items()}
    if not any(isinstance(f, _Alias) and f.mapping == mapping for f in sys.meta_path):
        sys.meta_path.append(_Alias(mapping))

"""Benchmarks of the feature store, the preprocessing jobs and the loaders against peers."""

from featurestore.moved import alias_modules as _alias_modules

# the 0.1 layout's module paths of the commands that moved out, importable until 0.3 (README)
_alias_modules("benchmarks", {
    "demo": "preprocess.synth.demo", "demo_train": "loaders.demo", "plan_cli": "loaders.cli",
})

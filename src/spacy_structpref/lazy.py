"""Package names that load on first use (a module ``__getattr__``, PEP 562):
spaCy imports every plugin's entry points whenever it builds a pipeline, so
a package those import keeps nltk and the compiled code out until a name
that needs them is used."""
from importlib import import_module
from typing import Callable, Dict


def lazy_names(package: str, modules: Dict[str, str]) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package`` that imports each name of
    ``modules`` (name -> submodule of ``package``) from its submodule on
    first use."""
    def __getattr__(name: str):
        if name not in modules:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f".{modules[name]}", package), name)

    return __getattr__

"""The package's import layers, read from the source with ``ast``: a module
imports only its own layer and those below it, never a private name of
another module (a ``_name`` imported, a ``_module`` of another package, an
``obj._attr`` its own classes do not define), and no modules import each
other in a loop (imports inside functions count: they still tie the code
together)."""
import ast
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

import spacy_structpref

PACKAGE = "spacy_structpref"
# Low to high; a package may import its own layer and the ones below.
LAYERS = (
    (PACKAGE, "about", "errors", "lazy", "progress", "saving"),
    ("corpora", "scoring", "trees"),
    ("kernels", "models", "parsing"),
    ("learners",),
    ("classification", "incremental", "reranking"),
    ("experiments",),
    ("components",),
    ("__main__", "cli", "distributed"),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
SRC = Path(spacy_structpref.__file__).resolve().parents[1]


# A named tuple's public API is spelled with a leading underscore.
NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}


def is_private(name: str) -> bool:
    return (name.startswith("_") and not (name.startswith("__") and name.endswith("__")) and name != "_"
            and name not in NAMEDTUPLE_API)


def find_modules(root: Path) -> Dict[str, Tuple[Optional[Path], bool]]:
    """Dotted name -> (source to read, None for a compiled module; whether it is a package)."""
    modules = {}
    for path in sorted((root / PACKAGE).rglob("*")):
        if path.suffix not in (".py", ".pyx"):
            continue
        parts = path.relative_to(root).with_suffix("").parts
        package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if package else parts)] = (path if path.suffix == ".py" else None, package)
    return modules


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


def imports(module: str, is_package: bool, tree: ast.AST) -> Iterator[Tuple[int, str, Optional[str]]]:
    """``(line, module, imported name or None)`` of every import, relative ones resolved."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = (module if is_package else module.rpartition(".")[0]).split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                yield node.lineno, base, alias.name


def owned_privates(tree: ast.AST) -> Set[str]:
    """The private attributes the module's own classes define (methods,
    class attributes, ``self._x`` assignments): other code may not touch them."""
    owned = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    owned.add(item.name)
                elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                    targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                    owned.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                owned.add(node.attr)
    return {name for name in owned if is_private(name)}


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan 1972)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def violations(root: Path) -> List[str]:
    """Every layer, private-name and cycle violation of the package under ``root``."""
    modules = find_modules(root)
    bad, graph = [], {}
    for module, (path, is_package) in modules.items():
        if path is None:
            continue
        where = f"{path.relative_to(root)}"
        me = layer_of(module)
        if me not in RANK:
            bad.append(f"{where}: package {me!r} is in no layer")
            continue
        tree = ast.parse(path.read_text(encoding="utf8"))
        for line, base, name in imports(module, is_package, tree):
            if base != PACKAGE and not base.startswith(PACKAGE + "."):
                continue
            target = f"{base}.{name}" if name and f"{base}.{name}" in modules else base
            if target != module:
                graph.setdefault(module, set()).add(target)
            them = layer_of(target)
            if RANK.get(them, len(LAYERS)) > RANK[me]:
                bad.append(f"{where}:{line}: {me} imports the higher layer {them} ({target})")
            if name and target == base and is_private(name):
                bad.append(f"{where}:{line}: private name {base}.{name}")
            parent, _, leaf = target.rpartition(".")
            own_package = module if is_package else module.rpartition(".")[0]
            if any(is_private(part) for part in target.split(".")) and not (is_private(leaf) and
                                                                            parent == own_package):
                bad.append(f"{where}:{line}: private module {target} of another package")
        owned = owned_privates(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and is_private(node.attr) and node.attr not in owned
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                bad.append(f"{where}:{node.lineno}: private attribute {ast.unparse(node)} of another module")
    for component in cycles(graph):
        bad.append("import cycle: " + " <-> ".join(component))
    return bad


def write(root: Path, files: Dict[str, str]) -> None:
    for name, text in files.items():
        path = root / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf8")


CLEAN = {
    "__init__.py": "from .about import __version__\n",
    "about.py": "__version__ = '0'\n",
    "errors.py": "class StructPrefError(ValueError):\n    pass\n",
    "trees/__init__.py": "from .arrays import SymbolTable\n",
    "trees/arrays.py": "from ..errors import StructPrefError\n\n\nclass SymbolTable:\n"
                       "    def __init__(self):\n        self._ids = {}\n\n    def merge(self, other):\n"
                       "        return other._ids\n",
    "kernels/__init__.py": "",
    "kernels/_kernels.pyx": "",
    "kernels/forests.py": "from . import _kernels\nfrom ..trees import SymbolTable\n",
    "components/base.py": "from ..kernels.forests import SymbolTable\n",
}


def test_a_clean_synthetic_package_passes(tmp_path):
    write(tmp_path, CLEAN)
    assert violations(tmp_path) == []


@pytest.mark.parametrize("name, text, expected", [
    ("trees/doc.py", "def f():\n    from ..components.base import x\n",
     "trees/doc.py:2: trees imports the higher layer components (spacy_structpref.components.base)"),
    ("kernels/trees.py", "from ..trees.arrays import _intern\n",
     "kernels/trees.py:1: private name spacy_structpref.trees.arrays._intern"),
    ("learners/kernels.py", "from ..kernels import _kernels\n",
     "learners/kernels.py:1: private module spacy_structpref.kernels._kernels of another package"),
    ("learners/perceptron.py", "import spacy_structpref.kernels._kernels as k\n",
     "learners/perceptron.py:1: private module spacy_structpref.kernels._kernels of another package"),
    ("learners/base.py", "from ..trees import SymbolTable\n\n\ndef f(t: SymbolTable):\n    return t._ids\n",
     "learners/base.py:5: private attribute t._ids of another module"),
    ("tools/x.py", "", "tools/x.py: package 'tools' is in no layer"),
])
def test_the_checker_flags_a_bad_import(tmp_path, name, text, expected):
    write(tmp_path, {**CLEAN, name: text})
    assert [v.replace(f"{PACKAGE}/", "", 1) for v in violations(tmp_path)] == [expected]


def test_the_checker_flags_a_cycle_through_a_function_level_import(tmp_path):
    write(tmp_path, {**CLEAN, "kernels/trees.py": "from .forests import SymbolTable\n",
                     "kernels/forests.py": "def gram():\n    from .trees import SymbolTable\n"})
    assert violations(tmp_path) == ["import cycle: spacy_structpref.kernels.forests <-> spacy_structpref.kernels.trees"]


def test_the_checker_flags_a_package_init_its_modules_import_back(tmp_path):
    write(tmp_path, {**CLEAN, "cli/__init__.py": "def command():\n    pass\n\n\nfrom . import report\n",
                     "cli/report.py": "from . import command\n"})
    assert violations(tmp_path) == ["import cycle: spacy_structpref.cli <-> spacy_structpref.cli.report"]


def test_the_package_imports_only_down_with_no_private_names_and_no_cycles():
    bad = violations(SRC)
    assert not bad, "\n".join(bad)

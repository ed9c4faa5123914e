"""spaCy imports every plugin's entry points when pipelines are created: ours
must stay importable and cheap even when a compiled extension is broken."""
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import spacy_structpref

PACKAGE_DIR = Path(spacy_structpref.__file__).parent
GROUPS = ("spacy_factories", "spacy_architectures", "spacy_scorers", "spacy_misc", "spacy_cli", "thinc_optimizers")


def _ours(group):
    return [ep for ep in entry_points(group=group) if ep.value.startswith("spacy_structpref")]


def test_entry_points_load():
    for group in GROUPS:
        for ep in _ours(group):
            assert ep.load() is not None, f"{group}: {ep.name}"


def test_blank_pipeline_survives_broken_extensions():
    compiled = sorted(
        ".".join(p.relative_to(PACKAGE_DIR.parent).with_suffix("").with_suffix("").parts)
        for p in PACKAGE_DIR.rglob("*.pyx"))
    code = (
        "import sys\n"
        f"for name in {compiled!r}:\n"
        "    sys.modules[name] = None  # importing it now raises ImportError\n"
        "import spacy\n"
        "from spacy.util import registry\n"
        "nlp = spacy.blank('en')\n"
        "registry.factories.get_all(); registry.architectures.get_all(); registry.scorers.get_all()\n"
        "registry.misc.get_all(); registry.optimizers.get_all()\n"
        "nlp('still works')\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr


def test_factory_modules_do_not_import_compiled_code():
    mods = sorted({ep.value.split(":")[0] for ep in _ours("spacy_factories")})
    code = (
        "import sys\n"
        f"for m in {mods!r}:\n"
        "    __import__(m)\n"
        "loaded = [m for m, mod in sys.modules.items() if m.startswith('spacy_structpref') and\n"
        "          getattr(mod, '__file__', '') and mod.__file__.endswith(('.so', '.pyd'))]\n"
        "print(loaded)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"factory modules import compiled code eagerly: {out.stdout}"

"""Paths the tests share: the checkout, its shipped configs, and the shared
data folder beside the checkout (corpora, the original EVALB, benches)."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"
SHIPPED_CONFIGS = sorted(p.name for p in CONFIGS.glob("*.cfg"))
# configs of spacy train; the others (no [training] block) are spacy assemble's
TRAINING_CONFIGS = [name for name in SHIPPED_CONFIGS if "\n[training]\n" in (CONFIGS / name).read_text("utf8")]
ASSEMBLE_CONFIGS = [name for name in SHIPPED_CONFIGS if name not in TRAINING_CONFIGS]
SHARED = ROOT.parent / "shared"

"""Paths the tests share: the checkout, its shipped configs, and the shared
data folder beside the checkout (corpora, the original EVALB, benches)."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"
SHIPPED_CONFIGS = sorted(p.name for p in CONFIGS.glob("*.cfg"))
SHARED = ROOT.parent / "shared"

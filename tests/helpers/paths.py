"""Paths the tests share: the checkout's shipped configs."""
from pathlib import Path

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
SHIPPED_CONFIGS = sorted(p.name for p in CONFIGS.glob("*.cfg"))

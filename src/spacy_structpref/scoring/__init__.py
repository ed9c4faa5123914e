"""Evaluation: PARSEVAL as EVALB computes it."""
from .parseval import EvalbParams, ParsevalResult, evalb, score_parseval

__all__ = ["EvalbParams", "ParsevalResult", "evalb", "score_parseval"]

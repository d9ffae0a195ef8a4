"""Measuring what memory does: Gain, Regression and the no-memory rerun band."""

from .metrics import EvalOptions, EvalReport, evaluate
from .rows import ResultRow, read_rows

__all__ = ["EvalOptions", "EvalReport", "ResultRow", "evaluate", "read_rows"]

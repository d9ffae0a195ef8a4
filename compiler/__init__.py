"""Turns trajectories into corpus files: input reading, redaction, offline and LLM compilation."""

from .build import add_runs, add_version, build_corpus
from .compile import CompileError, CompileLimits
from .llm import LLM, LLMCallError, LLMReply, LLMSettings
from .offline import OFFLINE_MODEL
from .report import BuildOptions, BuildReport

__all__ = [
    "LLM",
    "OFFLINE_MODEL",
    "BuildOptions",
    "BuildReport",
    "CompileError",
    "CompileLimits",
    "LLMCallError",
    "LLMReply",
    "LLMSettings",
    "add_runs",
    "add_version",
    "build_corpus",
]

"""The input formats' names, for `--format` and `--help` without importing the importers
(a test keeps this list equal to wikitrace.compiler.importers.READABLE)."""

FORMAT_NAMES = (
    "native",
    "claude-code",
    "codex",
    "gemini-cli",
    "langfuse",
    "otel-genai",
    "inspect-eval",
    "inspect",
    "atif",
    "tau2-bench",
    "tau-bench",
    "terminal-bench",
    "mini-swe-agent",
    "swe-agent",
    "openhands",
    "alfworld",
    "hotpotqa",
    "openai",
)

"""wikitrace inside the harnesses people run agents in (`wikitrace[inspect]`: inspect_ai).

Nothing here is imported by the CLI at start-up; each module imports its harness only when used.
"""

"""`python -m wikitrace.cli`."""

from .main import main

main()

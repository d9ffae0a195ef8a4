"""The `wikitrace` command line: a thin layer that parses, calls one core function, prints."""

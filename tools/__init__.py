"""Reading a finished corpus: drill-down tools, the agent's first message, citations, audit."""

"""Growing a corpus safely: the runner protocol and the update controller."""

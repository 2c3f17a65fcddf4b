"""One suite over every store kind: the same questions, the same answers, per kind."""

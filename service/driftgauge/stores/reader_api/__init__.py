"""The reader API store kind: the HTTP endpoint of the application readers use."""

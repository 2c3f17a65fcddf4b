"""Configuration as every layer sees it: frozen runtime objects, value types and secrets."""

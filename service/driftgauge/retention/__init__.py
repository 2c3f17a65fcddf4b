"""Retention: delete stored results past their age that nothing served still reads."""

"""The canonical row encoding and its digest, the reference every store must match."""

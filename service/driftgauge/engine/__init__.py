"""The reconciliation engine: pure, it talks to stores only through the adapter Protocol."""

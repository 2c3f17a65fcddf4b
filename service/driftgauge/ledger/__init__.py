"""The run ledger: what each sync-job run was handed and where every row ended up."""

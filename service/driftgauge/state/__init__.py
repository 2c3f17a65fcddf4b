"""The state database: driftgauge's own record of runs and their results."""

from driftgauge.state.codec import RunRow, StoredBucket, StoredKey
from driftgauge.state.store import KeyHasher, StateStore, default_replica

__all__ = ["KeyHasher", "RunRow", "StateStore", "StoredBucket", "StoredKey", "default_replica"]

"""simdb: a persistent on-disk database of SimHash fingerprints for near-duplicate detection."""

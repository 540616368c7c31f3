"""brutus: a compaction-aware persistent session store for long-running coding agents."""

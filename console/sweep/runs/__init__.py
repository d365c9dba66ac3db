"""A run's files: its events, its tables, its lock, and runs imported from elsewhere."""

"""brutus's alembic migrations (installed as ``brutus._migrations``)."""

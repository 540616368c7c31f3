"""Storage: tables, engines and migrations."""

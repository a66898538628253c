"""Autotuning: kernel search and the SQLite tuning database that remembers every measurement (`search.db`)."""

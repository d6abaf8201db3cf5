//! rtlab-store: Run history in an embedded SQLite database.

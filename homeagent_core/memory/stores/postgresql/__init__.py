"""Store backends other than the embedded SQLite files: PostgreSQL with pgvector.

Imported on demand only (psycopg is an optional extra: ``pip install "homeagent[postgres]"``).
"""

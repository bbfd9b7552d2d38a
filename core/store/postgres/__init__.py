"""The PostgreSQL backend: every store port on one shared connection pool,
for several `kept run` workers on one database.

connection.py   the psycopg pool and transaction helpers
migrations/     the numbered schema migrations (this backend's own numbering)
"""

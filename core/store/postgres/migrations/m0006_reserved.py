"""A placeholder for migration 0006, numbered by another branch of issue 13
(migrations are numbered without gaps). Drop this file when that branch's
m0006 is merged."""

SQL = "SELECT 1"

"""A placeholder for migration 0005, numbered by another branch of issue 13
(migrations are numbered without gaps). Drop this file when that branch's
m0005 is merged."""

SQL = "SELECT 1"

"""Nothing to do on SQLite.

On PostgreSQL this step gives search rows their agent and id spans. SQLite
scopes a search by agent through rowid ranges (step 6, agent ranges), so the
step is a no-op here and exists to keep the version numbers of both
backends the same.
"""

SQL = ""

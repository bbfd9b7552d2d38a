"""Nothing to do on PostgreSQL.

On SQLite this step moves each agent's full-text rows into a rowid range of
their own. PostgreSQL scopes a search by agent in its own way (step 11,
search scope), so the step is a no-op here and exists to keep the version
numbers of both backends the same.
"""

SQL = ""

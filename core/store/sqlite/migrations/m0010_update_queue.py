"""Nothing to do on SQLite.

On PostgreSQL this step creates the update queue through which the polling
worker hands platform updates to every worker. SQLite runs one worker, which
handles its updates in-process, so the step is a no-op here and exists to
keep the version numbers of both backends the same.
"""

SQL = ""

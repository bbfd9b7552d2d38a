"""Holds step 19's place until the branch that owns it merges (no schema change)."""

SQL = ""

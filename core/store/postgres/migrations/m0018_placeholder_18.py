"""Holds step 18's place until the branch that owns it merges (no schema change)."""

SQL = ""

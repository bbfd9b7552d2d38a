"""A user's data: which tables hold it (holdings), and, built on that one
list, erasure, export and retention."""

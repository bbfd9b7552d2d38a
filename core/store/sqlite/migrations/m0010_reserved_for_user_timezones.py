"""A placeholder: version 10 belongs to the user time-zone migration of issue
14's time-zone branch, merged beside this one. It keeps this branch's
numbering free of gaps until then; at the merge this file is deleted and that
branch's m0010 takes its place (a database never left a development machine
at this version)."""

SQL = "SELECT 1;"

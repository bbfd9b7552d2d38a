"""Step 18 is another branch's (issue 25): this placeholder keeps the
numbering without gaps until that branch is merged, and goes then."""

SQL = ""

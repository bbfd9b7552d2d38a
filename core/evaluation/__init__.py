"""Measuring kept against labelled data: the extraction set, its scoring and runs."""

"""Heartbeat: delivers due commitments as one check-in per scope, and fires
due reminders. See scheduler.py for when it wakes, turn.py for one delivery."""

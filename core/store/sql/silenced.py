"""Whether follow-ups are switched off for a member or a chat, as SQL
conditions the statements that create and deliver follow-ups carry, so the
switch is read in the same transaction as the row it stops (whichever
worker runs it, whenever the user switched)."""

from __future__ import annotations

# True when the `commitments` row's member or chat switched follow-ups off.
SILENCED = (
    "(EXISTS (SELECT 1 FROM followup_preferences p WHERE p.agent_id = commitments.agent_id "
    "AND p.platform = commitments.platform AND p.user_id = commitments.sender_id "
    "AND p.enabled = 0) "
    "OR EXISTS (SELECT 1 FROM chat_followup_preferences g "
    "WHERE g.session_key = commitments.session_key AND g.enabled = 0))"
)

# The same for a scope about to get new follow-ups from an extraction
# (parameters: agent id, platform, member, session key).
SILENCED_SCOPE = (
    "SELECT 1 FROM followup_preferences WHERE agent_id = ? AND platform = ? "
    "AND user_id = ? AND enabled = 0 "
    "UNION ALL SELECT 1 FROM chat_followup_preferences WHERE session_key = ? AND enabled = 0"
)

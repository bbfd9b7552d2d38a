"""A reply's send state: `stored` when the model's answer is in the
transcript, `sending` once its request left for the platform, `sent` when
the platform took it. After a crash, a reply still `stored` never left the
process and is sent; one `sending` may have been taken and never is again.
NULL: rows that are no reply of a turn (and replies stored before this step)."""

SQL = """
ALTER TABLE messages ADD COLUMN send_state TEXT
    CHECK (send_state IN ('stored', 'sending', 'sent'));

CREATE INDEX messages_reply_unsent ON messages(ts) WHERE send_state = 'stored';
"""

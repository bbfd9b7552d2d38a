"""The DDL of the schema steps both backends build alike, written once.

A template is a step's statements, or the part of them both databases share,
with the words each database spells its own way in braces (column types, a
generated id, SQLite's `WITHOUT ROWID`), which `Dialect.ddl` fills in. Each
backend's step module (`mNNNN_<name>.py`, core/store/migration_steps.py)
renders its template and adds what is its own: triggers, and the indexes each
planner wants in its own shape. Where such an index stood among a table's
shared ones it fills a slot there (`{due_index}`): SQLite's planner breaks
ties between a table's indexes by their order, so the order stays as it was.

A template is history once released: a database built from it must keep the
same schema as one built from it later, so a change is a new step.
"""

# Step 1. Sessions and their messages. `{active}` is the backend's column for
# "not hidden"; `{more_session_columns}`, PostgreSQL's `index_behind` (SQLite's
# comes with step 2).
TRANSCRIPT = """
CREATE TABLE sessions (
    id          {generated_id},
    key         {text} NOT NULL UNIQUE,
    agent_id    {text} NOT NULL,
    platform    {text} NOT NULL,
    chat_id     {text} NOT NULL,
    chat_kind   {text} NOT NULL,
    thread_id   {text},
    created_at  {time} NOT NULL,
    updated_at  {time} NOT NULL{more_session_columns}
);

-- platform and chat_id are copied from the session so the duplicate check
-- below can be a plain unique index.
CREATE TABLE messages (
    id                   {generated_id},
    session_id           {bigint} NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    platform             {text} NOT NULL,
    chat_id              {text} NOT NULL,
    role                 {text} NOT NULL,
    kind                 {text} NOT NULL,
    text                 {text} NOT NULL,
    payload              {text},
    sender_id            {text},
    platform_message_id  {text},
    in_reply_to          {bigint} REFERENCES messages(id) ON DELETE SET NULL,
    ts                   {time} NOT NULL,
    active               {active}
);

CREATE INDEX messages_session ON messages(session_id, id);

-- history(): a turn's replies sort right after the user message that started
-- it, so the range scan runs on the turn number, not on the id.
CREATE INDEX messages_session_turn ON messages(session_id, coalesce(in_reply_to, id), id);

-- unanswered() and ON DELETE SET NULL look replies up by the message they answer.
CREATE INDEX messages_in_reply_to ON messages(in_reply_to);

-- A platform update delivered twice must not start two turns.
CREATE UNIQUE INDEX messages_platform_dedupe
    ON messages(platform, chat_id, platform_message_id)
    WHERE role = 'user' AND platform_message_id IS NOT NULL;
"""

# Step 3. Inferred commitments: short-lived follow-ups, one scope each. Every
# row carries its session key and agent id, so a PostgreSQL sharded by session
# key needs no new columns; the claim columns come with steps 5 (heartbeat)
# and 7 (claim leases). Every index answers one question that would otherwise
# scan the table:
#
# - commitments_due:     active rows by due time (due work, next due time)
# - commitments_dedupe:  one active commitment per (session, sender, dedupe
#                        key); also "active commitments of these sessions" for
#                        extraction and the slash commands
# - commitments_expiry:  the expiry sweep, "active with due_latest before T"
# - commitments_sent:    the rolling 24 h cap, "sent in this agent session since T"
# - commitments_session: a chat's commitments of any status, and session deletion
COMMITMENTS = """
CREATE TABLE commitments (
    id                 {text} PRIMARY KEY,
    agent_id           {text} NOT NULL,
    session_key        {text} NOT NULL,
    platform           {text} NOT NULL,
    chat_id            {text} NOT NULL,
    thread_id          {text},
    sender_id          {text},
    kind               {text} NOT NULL CHECK (kind IN
                           ('event_check_in', 'deadline_check', 'care_check_in', 'open_loop')),
    sensitivity        {text} NOT NULL CHECK (sensitivity IN ('routine', 'personal', 'care')),
    source             {text} NOT NULL CHECK (source IN ('inferred_user_context', 'agent_promise')),
    status             {text} NOT NULL CHECK (status IN
                           ('pending', 'snoozed', 'sent', 'dismissed', 'resolved', 'expired',
                            'failed')),
    reason             {text} NOT NULL,
    suggested_text     {text} NOT NULL,
    dedupe_key         {text} NOT NULL,
    confidence         {real} NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    due_earliest       {time} NOT NULL,
    due_latest         {time} NOT NULL CHECK (due_latest >= due_earliest),
    due_timezone       {text} NOT NULL,
    -- Informational, no foreign key: deleting a message must not have to
    -- look through commitments, and the commitment stands on its own.
    source_message_id  {bigint},
    created_at         {time} NOT NULL,
    updated_at         {time} NOT NULL,
    attempts           {integer} NOT NULL DEFAULT 0,
    last_error         {text},
    sent_at            {time},
    sent_message_id    {text},
    dismissed_at       {time},
    snoozed_until      {time},
    expired_at         {time},
    resolved_at        {time}
);

-- Partial indexes hold active rows only, so they stay small however many
-- finished commitments pile up; the status is in their WHERE rather than a
-- leading column (which would split every range in two and lead the planner
-- to prefer it over the scope index). Queries repeat the exact WHERE term
-- (status IN ('pending', 'snoozed')), so the planner can prove that a query's
-- WHERE implies the index's.
CREATE INDEX commitments_due ON commitments(due_earliest)
    WHERE status IN ('pending', 'snoozed');

CREATE UNIQUE INDEX commitments_dedupe
    ON commitments(session_key, coalesce(sender_id, ''), dedupe_key)
    WHERE status IN ('pending', 'snoozed');

CREATE INDEX commitments_expiry ON commitments(due_latest)
    WHERE status IN ('pending', 'snoozed');

CREATE INDEX commitments_sent ON commitments(agent_id, session_key, sent_at)
    WHERE sent_at IS NOT NULL;

CREATE INDEX commitments_session ON commitments(session_key, status);
"""

# Step 4. Exact reminders (scheduled tasks), one chat each; the claim columns
# beyond `claimed_at` come with step 7 (claim leases). `{due_index}` is the
# backend's reminders_due, the scheduler's way to due work. reminders_session:
# one chat's reminders (the list and cancel tools), and session deletion.
REMINDERS = """
CREATE TABLE reminders (
    id             {text} PRIMARY KEY,
    agent_id       {text} NOT NULL,
    session_key    {text} NOT NULL,
    platform       {text} NOT NULL,
    chat_id        {text} NOT NULL,
    thread_id      {text},
    created_by     {text},
    text           {text} NOT NULL,
    kind           {text} NOT NULL CHECK (kind IN ('at', 'after', 'cron')),
    -- Not checked beyond presence: a damaged expression must still load, so
    -- the service can report that one row and carry on with the others.
    cron           {text} CHECK ((kind = 'cron') = (cron IS NOT NULL)),
    timezone       {text} NOT NULL,
    next_fire_at   {time} NOT NULL,
    status         {text} NOT NULL CHECK (status IN ('active', 'done', 'cancelled', 'failed')),
    claimed_at     {time},
    last_fired_at  {time},
    attempts       {integer} NOT NULL DEFAULT 0,
    last_error     {text},
    created_at     {time} NOT NULL,
    updated_at     {time} NOT NULL
);

{due_index}

CREATE INDEX reminders_session ON reminders(session_key, next_fire_at);
"""

# Step 8. The extraction queue as rows (core/commitments/jobs.py): exchanges
# waiting for the extraction pass survive a stop or a crash, and any worker may
# adopt the ones nobody vouches for. `{lease_index}` is the backend's
# extraction_jobs_lease: orphans in queue order, released ones first, then by
# lease end.
EXTRACTION_JOBS = """
CREATE TABLE extraction_jobs (
    id               {generated_id},
    agent_id         {text} NOT NULL,
    session_key      {text} NOT NULL,
    platform         {text} NOT NULL,
    chat_id          {text} NOT NULL,
    thread_id        {text},
    sender_id        {text},
    chat_kind        {text} NOT NULL,
    user_message_id  {bigint} NOT NULL,
    user_text        {text} NOT NULL,
    assistant_text   {text} NOT NULL,
    created_at       {time} NOT NULL,
    -- NULL claimed_by: released, any worker may take it.
    claimed_by       {text},
    lease_until      {time}
);

{lease_index}
CREATE INDEX extraction_jobs_worker ON extraction_jobs(claimed_by) WHERE claimed_by IS NOT NULL;
CREATE INDEX extraction_jobs_session ON extraction_jobs(session_key);
"""

# Step 9. Extraction pauses as rows (core/commitments/pause.py), one per agent:
# kept across restarts, and the first worker to hit an authentication or
# unknown-model error pauses the agent for every worker.
EXTRACTION_PAUSES = """
CREATE TABLE extraction_pauses (
    agent_id  {text} PRIMARY KEY,
    until     {time} NOT NULL,
    kind      {text} NOT NULL,
    error     {text} NOT NULL
);
"""

# Step 12. Each user's own time zone (core/users), one row per (platform, user id).
USER_ZONES = """
CREATE TABLE user_zones (
    platform    {text} NOT NULL,
    user_id     {text} NOT NULL,
    timezone    {text} NOT NULL,
    updated_at  {time} NOT NULL,
    PRIMARY KEY (platform, user_id)
){without_rowid};
"""

# Step 13. Small named values the bot keeps about itself
# (core/store/app_state.py), e.g. the hash of the Discord command tree last synced.
APP_STATE = """
CREATE TABLE app_state (
    key    {text} PRIMARY KEY,
    value  {text} NOT NULL
);
"""

# Step 14. Pairing (core/pairing): the codes given to unknown users in direct
# messages, and the users the operator approved.
PAIRING = """
CREATE TABLE pairing_requests (
    platform    {text} NOT NULL,
    user_id     {text} NOT NULL,
    code        {text} NOT NULL UNIQUE,
    username    {text},
    created_at  {time} NOT NULL,
    expires_at  {time} NOT NULL,
    PRIMARY KEY (platform, user_id)
){without_rowid};

CREATE TABLE paired_users (
    platform     {text} NOT NULL,
    user_id      {text} NOT NULL,
    username     {text},
    approved_at  {time} NOT NULL,
    PRIMARY KEY (platform, user_id)
){without_rowid};
"""

# Step 15. Updates parked after failing while others were stored
# (core/store/parked.py).
PARKED_UPDATES = """
CREATE TABLE parked_updates (
    source              {text} NOT NULL,
    update_id           {bigint} NOT NULL,
    lane                {text} NOT NULL,
    payload             {text} NOT NULL,
    error               {text} NOT NULL,
    tries               {integer} NOT NULL,
    parked_at           {time} NOT NULL,
    retry_requested_at  {time},
    PRIMARY KEY (source, update_id)
);
"""

# Step 16. Pairing (core/pairing): when a code's notice was last sent, so a
# stranger who keeps writing is not sent it again with every message
# (whichever worker answers), the age order the oldest requests give way in,
# and the users the operator blocked.
PAIRING_NOTICES_AND_BLOCKS = """
ALTER TABLE pairing_requests ADD COLUMN notified_at {time};

CREATE INDEX pairing_requests_by_age ON pairing_requests (platform, created_at);

CREATE TABLE pairing_blocks (
    platform    {text} NOT NULL,
    user_id     {text} NOT NULL,
    username    {text},
    blocked_at  {time} NOT NULL,
    PRIMARY KEY (platform, user_id)
){without_rowid};
"""

# Step 17. A reply's send state: `stored` when the model's answer is in the
# transcript, `sending` once its request left for the platform, `sent` when the
# platform took it. After a crash, a reply still `stored` never left the
# process and is sent; one `sending` may have been taken and never is again.
# NULL: rows that are no reply of a turn (and replies stored before this step).
REPLY_SEND_STATE = """
ALTER TABLE messages ADD COLUMN send_state {text}
    CHECK (send_state IN ('stored', 'sending', 'sent'));

CREATE INDEX messages_reply_unsent ON messages(ts) WHERE send_state = 'stored';
"""

# Step 18. Follow-up preferences (core/users/followup_prefs.py): a user's own,
# per agent and platform, in every chat; a shared chat's, set by its admin,
# per session. No row: follow-ups are on. `enabled` is 0 or 1 on both.
FOLLOWUP_PREFERENCES = """
CREATE TABLE followup_preferences (
    agent_id    {text} NOT NULL,
    platform    {text} NOT NULL,
    user_id     {text} NOT NULL,
    enabled     {integer} NOT NULL CHECK (enabled IN (0, 1)),
    updated_at  {time} NOT NULL,
    PRIMARY KEY (agent_id, platform, user_id)
){without_rowid};

CREATE TABLE chat_followup_preferences (
    session_key  {text} PRIMARY KEY,
    enabled      {integer} NOT NULL CHECK (enabled IN (0, 1)),
    updated_at   {time} NOT NULL
){without_rowid};
"""

# Step 19. Where a chat's conversation starts for the model (`/new`): the
# model's context holds only the turns of messages with a greater id; NULL:
# the whole session. The earlier rows stay (searchable, erasable, exported).
CONVERSATION_STARTS = """
ALTER TABLE sessions ADD COLUMN context_after {bigint};
"""

# Step 20. Retention (core/store/sql/retention.py) finds the oldest rows of
# each kind without reading the others: messages by their time, whatever
# their role (messages_user_ts holds only users'), and follow-ups and
# reminders that ended by when they ended (every status change sets
# updated_at). The last two are partial, so they hold only ended rows and
# the due and scope indexes stay as they were; queries repeat the WHERE.
RETENTION_INDEXES = """
CREATE INDEX messages_ts ON messages(ts);
CREATE INDEX commitments_ended ON commitments(updated_at)
    WHERE status NOT IN ('pending', 'snoozed');
CREATE INDEX reminders_ended ON reminders(updated_at) WHERE status <> 'active';
"""

# Step 21. Limits (core/limits/): each rate's state, each day's token
# budget, and one row per model call for `kept usage`.
# rate_windows: a user's or a shared chat's rate as GCRA keeps it, the
# "theoretical arrival time" of its next message; the message is refused
# while that lies more than the burst ahead (`allowed`: what the last
# decision was, read back by the statement that made it). `noticed_until`: the window
# the sender was told about, so a flood gets one notice, not one a message.
# token_budgets: per subject (a user, a shared chat, the whole bot: kind
# 'bot' with empty platform and id) and UTC day, the tokens spent and the
# tokens held by calls under way; a call is made only while spent + held
# is below the cap, in the same transaction that adds its hold, so every
# worker counts against the same row. `noticed`: the subject was told.
# model_usage: what each call used, by whom (user, chat) and why (role).
# The two counters' tables have no index beyond their key: every message
# and call writes them, and each index would be one more page per commit;
# retention's prune reads them whole (a row per active subject and day).
LIMITS = """
CREATE TABLE rate_windows (
    kind           {text} NOT NULL CHECK (kind IN ('user', 'chat')),
    platform       {text} NOT NULL,
    subject_id     {text} NOT NULL,
    tat            {time} NOT NULL,
    allowed        {integer} NOT NULL CHECK (allowed IN (0, 1)),
    noticed_until  {time},
    PRIMARY KEY (kind, platform, subject_id)
){without_rowid};

CREATE TABLE token_budgets (
    kind        {text} NOT NULL CHECK (kind IN ('user', 'chat', 'bot')),
    platform    {text} NOT NULL,
    subject_id  {text} NOT NULL,
    day         {text} NOT NULL,
    spent       {bigint} NOT NULL DEFAULT 0,
    held        {bigint} NOT NULL DEFAULT 0,
    noticed     {integer} NOT NULL DEFAULT 0 CHECK (noticed IN (0, 1)),
    PRIMARY KEY (kind, platform, subject_id, day)
){without_rowid};

CREATE TABLE model_usage (
    id          {generated_id},
    at          {time} NOT NULL,
    agent_id    {text} NOT NULL,
    role        {text} NOT NULL,
    model       {text} NOT NULL,
    platform    {text},
    user_id     {text},
    chat_id     {text},
    shared      {integer} NOT NULL CHECK (shared IN (0, 1)),
    tokens_in   {bigint} NOT NULL,
    tokens_out  {bigint} NOT NULL,
    estimated   {integer} NOT NULL CHECK (estimated IN (0, 1))
);

CREATE INDEX model_usage_at ON model_usage(at);
CREATE INDEX model_usage_user ON model_usage(platform, user_id, at);
"""

# Step 22. A user's active reminders, counted at each creation against
# `limits.perUser.activeReminders` (core/store/sql/reminders.py): the
# count reads that user's rows only (active, and ended ones until
# retention erases them). Neither partial on status = 'active' nor holding
# status: either makes it a candidate for every query on active rows, and
# a planner may then walk it for a chat's list or the claims instead of
# the index made for them.
REMINDER_CREATORS = """
CREATE INDEX reminders_creator ON reminders(platform, created_by);
"""

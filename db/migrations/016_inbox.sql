-- The unified inbox on top of migration 014: read and archived state, labels, the inbound-email
-- webhook's per-workspace secret and reply address, outbound replies with their delivery state,
-- and AI-suggested replies that wait for a person.

alter table inbox_threads
  -- A new inbound message makes a thread unread; a person marks it read (or unread again).
  add column unread boolean not null default false,
  add column archived_at timestamptz,
  -- The last message is an inbound reply nobody answered yet (bounces and auto-replies need none).
  add column needs_reply boolean not null default false,
  add column last_inbound_at timestamptz,
  add column message_count integer not null default 0,
  add column snippet text,
  -- pnet: the sender account whose conversation this is (replies go out through it).
  add column pnet_account_id uuid references pnet_accounts (id) on delete set null,
  -- email: our address in the conversation (the inbound mail's To), the From of our replies.
  add column our_address text;
create index inbox_threads_activity on inbox_threads (workspace_id, last_message_at desc nulls last, id);

alter table inbox_messages
  add column to_email text,
  -- Email threading headers as received or sent.
  add column in_reply_to text,
  add column reference_ids text[] not null default '{}',
  -- Outbound replies only: 'sending' is recorded with the Message-ID before the send, so a retry
  -- sends the same Message-ID again at most, never a second message of its own.
  add column delivery_status text check (delivery_status in ('sending', 'sent', 'queued', 'failed')),
  add column delivery_error text,
  add column sent_by text,
  -- pnet replies go out as a browser step.
  add column browser_step_id uuid;

create table inbox_labels (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  name text not null check (length(name) between 1 and 100),
  color text,
  created_at timestamptz not null default now(),
  unique (workspace_id, name)
);

create table inbox_thread_labels (
  thread_id uuid not null references inbox_threads (id) on delete cascade,
  label_id uuid not null references inbox_labels (id) on delete cascade,
  created_at timestamptz not null default now(),
  primary key (thread_id, label_id)
);
create index inbox_thread_labels_label on inbox_thread_labels (label_id);

-- One row per workspace that set up its inbox. The webhook secret must be readable to verify an
-- HMAC, so it is stored as generated; rotating it replaces it.
create table inbox_settings (
  workspace_id uuid primary key references workspaces (id) on delete cascade,
  webhook_secret text,
  webhook_secret_rotated_at timestamptz,
  reply_from_address text,
  reply_from_name text,
  updated_at timestamptz not null default now()
);

create table inbox_suggestions (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  thread_id uuid not null references inbox_threads (id) on delete cascade,
  -- The inbound message it answers: one suggestion per message.
  message_id uuid not null unique references inbox_messages (id) on delete cascade,
  status text not null default 'pending' check (status in ('pending', 'approved', 'dismissed')),
  subject text,
  body text not null,
  -- The model that wrote it, or 'local-template-writer'.
  model_key text not null,
  credits_charged integer not null default 0,
  -- The reply sent when it was approved, and whether a person edited it first.
  sent_message_id uuid references inbox_messages (id) on delete set null,
  edited boolean not null default false,
  decided_by text,
  decided_at timestamptz,
  created_at timestamptz not null default now()
);
create index inbox_suggestions_pending on inbox_suggestions (workspace_id, created_at desc) where status = 'pending';

-- Mailboxes read over IMAP, each by its own workflow (`inbox-mailbox/<id>`). The durable cursor is
-- (uid_validity, last_uid): a UID means something only under its UIDVALIDITY, so a new
-- UIDVALIDITY reads the folder again from the start (messages already recorded are skipped by
-- Message-ID). The password must be usable to log in, so it is stored as given and never returned.
create table inbox_mailboxes (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  address text not null,
  host text not null,
  port integer not null check (port between 1 and 65535),
  secure boolean not null default true,
  username text not null,
  password text not null,
  folder text not null default 'INBOX',
  poll_seconds integer not null default 60 check (poll_seconds between 15 and 86400),
  enabled boolean not null default true,
  uid_validity bigint,
  last_uid bigint not null default 0,
  messages_recorded integer not null default 0,
  last_polled_at timestamptz,
  last_error text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (workspace_id, host, username, folder)
);

-- What stops outreach to a person, shared by the inbox (which records it) and sequences (which
-- obey it): the workspace do-not-contact list, inbound replies and bounces, and explicit stops.
-- A sequence asks contact_stop_reason() inside the transaction that records a send, so "reply
-- wins" is a database read at the last moment, not a message that might arrive late.

-- Emails and profile URLs are compared in one normal form, written by these two functions only.
create function normalize_email(value text) returns text
language sql immutable as $$ select nullif(lower(btrim(value)), '') $$;

-- https://www.example.com/in/Jane-Doe/?x=1 -> example.com/in/jane-doe
create function normalize_profile_url(value text) returns text
language sql immutable as $$
  select nullif(regexp_replace(regexp_replace(regexp_replace(lower(btrim(value)),
    '^(https?://)?(www\.)?', ''), '[?#].*$', ''), '/+$', ''), '')
$$;

create table do_not_contact_entries (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  kind text not null check (kind in ('email', 'domain', 'profile_url')),
  -- normalize_email for email, lower-case bare domain for domain, normalize_profile_url for profile_url
  value text not null check (length(value) between 1 and 512),
  reason text,
  -- Where it came from: 'manual', 'import', 'inbox_bulk', 'unsubscribe', 'bounce', ...
  source text not null default 'manual',
  created_by text,
  created_at timestamptz not null default now(),
  unique (workspace_id, kind, value)
);

-- A conversation with one person on one channel.
create table inbox_threads (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  channel text not null check (channel in ('email', 'pnet')),
  subject text,
  contact_name text,
  contact_email text,        -- normalize_email
  contact_profile_url text,  -- normalize_profile_url
  -- The sequence contact the thread belongs to, when a sequence opened it (no foreign key: the
  -- sequences migration comes later and a thread outlives its sequence).
  sequence_contact_id uuid,
  -- Email: the Message-ID of the first message; pnet: the conversation's id on the network.
  external_key text,
  last_message_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  check (contact_email is not null or contact_profile_url is not null)
);
create unique index inbox_threads_external on inbox_threads (workspace_id, channel, external_key) where external_key is not null;
create index inbox_threads_email on inbox_threads (workspace_id, contact_email) where contact_email is not null;
create index inbox_threads_profile on inbox_threads (workspace_id, contact_profile_url) where contact_profile_url is not null;

create table inbox_messages (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  thread_id uuid not null references inbox_threads (id) on delete cascade,
  direction text not null check (direction in ('inbound', 'outbound')),
  -- 'reply' (a person wrote), 'bounce' (delivery failed), 'auto_reply' (out of office), 'sent'
  kind text not null check (kind in ('reply', 'bounce', 'auto_reply', 'sent')),
  -- For a bounce, from_email is the address that bounced, not the mailer daemon's.
  from_email text,        -- normalize_email
  from_profile_url text,  -- normalize_profile_url
  subject text,
  body text not null default '',
  -- Email Message-ID or the network's message id: the same message recorded twice is one row.
  external_id text,
  occurred_at timestamptz not null,
  created_at timestamptz not null default now()
);
create unique index inbox_messages_external on inbox_messages (workspace_id, external_id) where external_id is not null;
create index inbox_messages_thread on inbox_messages (thread_id, occurred_at);
create index inbox_messages_inbound_email on inbox_messages (workspace_id, from_email, occurred_at) where direction = 'inbound';
create index inbox_messages_inbound_profile on inbox_messages (workspace_id, from_profile_url, occurred_at) where direction = 'inbound';

-- "Stop this person's current sequences" without listing them as do-not-contact (a bulk
-- do-not-contact of a person with no email, or a person stopping one by hand).
create table contact_stops (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  email text,        -- normalize_email
  profile_url text,  -- normalize_profile_url
  sequence_contact_id uuid,
  reason text not null default 'stopped',
  created_by text,
  created_at timestamptz not null default now(),
  check (email is not null or profile_url is not null or sequence_contact_id is not null)
);
create index contact_stops_email on contact_stops (workspace_id, email) where email is not null;
create index contact_stops_profile on contact_stops (workspace_id, profile_url) where profile_url is not null;
create index contact_stops_contact on contact_stops (sequence_contact_id) where sequence_contact_id is not null;

-- Why outreach to this person must stop now, or null: do_not_contact (at any time), or a reply,
-- bounce or stop recorded at or after `since` (the contact's enrolment). An auto-reply is not a
-- reply. Arguments are raw; they are normalised here.
create function contact_stop_reason(ws uuid, email text, profile_url text, since timestamptz, contact uuid default null)
returns text language sql stable as $$
  with who as (select normalize_email(email) as e, normalize_profile_url(profile_url) as p)
  select case
    when exists (
      select 1 from do_not_contact_entries d, who
      where d.workspace_id = ws and (
        (d.kind = 'email' and d.value = who.e)
        or (d.kind = 'domain' and who.e is not null and d.value = split_part(who.e, '@', 2))
        or (d.kind = 'profile_url' and d.value = who.p)))
      then 'do_not_contact'
    when exists (
      select 1 from inbox_messages m, who
      where m.workspace_id = ws and m.direction = 'inbound' and m.kind = 'bounce' and m.occurred_at >= since
        and m.from_email is not distinct from who.e and who.e is not null)
      then 'bounced'
    when exists (
      select 1 from inbox_messages m, who
      where m.workspace_id = ws and m.direction = 'inbound' and m.kind = 'reply' and m.occurred_at >= since
        and ((who.e is not null and m.from_email = who.e) or (who.p is not null and m.from_profile_url = who.p)))
      then 'replied'
    when exists (
      select 1 from contact_stops s, who
      where s.workspace_id = ws and s.created_at >= since and (
        (who.e is not null and s.email = who.e) or (who.p is not null and s.profile_url = who.p)
        or (contact is not null and s.sequence_contact_id = contact)))
      then 'stopped'
  end
$$;

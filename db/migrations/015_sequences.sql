-- Sequences (spec 1, third bullet; 2.7): saved email templates, versioned step graphs with a
-- table audience and senders, one contact per enrolled row, the sends a contact made (the guard
-- that an email goes out at most once) and the workspace's outreach settings.

-- Saved email templates (2.7). Segments are jsonb arrays validated by domain/email-templates.ts.
create table email_templates (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  name text not null check (length(name) between 1 and 255),
  scope text not null default 'sequence_step',
  subject_segments jsonb not null default '[]',
  body_segments jsonb not null default '[]',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index email_templates_list on email_templates (workspace_id, created_at desc, id desc);

create table sequences (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  name text not null check (length(name) between 1 and 255),
  audience_table_id uuid references tables (id) on delete set null,
  -- draft: contacts may be enrolled but nothing is sent until launch; paused holds every step.
  status text not null default 'draft' check (status in ('draft', 'active', 'paused', 'archived')),
  -- The version new contacts start on (the newest).
  current_version integer not null default 1 check (current_version >= 1),
  -- Audience column ids by field: email, profile_url, first_name, last_name, company_name.
  audience_mapping jsonb not null default '{}',
  -- Rows added to the audience table later are enrolled as they arrive.
  feed_new_rows boolean not null default false,
  -- The audience row (table_rows.seq) the feed has read up to; rows after it are enrolled as they arrive.
  feed_cursor bigint not null default 0,
  email_mode text not null default 'manual' check (email_mode in ('manual', 'automatic')),
  pnet_mode text not null default 'manual' check (pnet_mode in ('manual', 'automatic')),
  -- Every change bumps it; edits carry expected_revision (compare-and-set).
  revision integer not null default 1,
  -- The round-robin cursor that spreads new contacts across senders.
  sender_cursor bigint not null default 0,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (workspace_id, id)
);
create index sequences_list on sequences (workspace_id, created_at desc);
create index sequences_feed on sequences (audience_table_id) where feed_new_rows and status <> 'archived';

-- Each version's graph is immutable once a contact started on it; a live edit makes a new one.
create table sequence_versions (
  sequence_id uuid not null references sequences (id) on delete cascade,
  version integer not null check (version >= 1),
  graph jsonb not null,
  created_at timestamptz not null default now(),
  primary key (sequence_id, version)
);

-- Senders of a sequence: contacts are spread across them and stay with theirs.
create table sequence_senders (
  sequence_id uuid not null references sequences (id) on delete cascade,
  sender_profile_id uuid not null references sender_profiles (id) on delete cascade,
  -- The mailbox the sender's email steps go out from.
  from_email text,
  from_name text,
  position integer not null,
  primary key (sequence_id, sender_profile_id)
);

create table sequence_contacts (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  sequence_id uuid not null references sequences (id) on delete cascade,
  -- The audience table row (the "record"); no foreign key: a contact outlives a deleted row.
  row_id uuid not null,
  -- '<sequence_id>:<row_id>': the contact_key of browser steps, pnet holds and agent conversations.
  contact_key text not null,
  email text,
  profile_url text,
  first_name text,
  last_name text,
  company_name text,
  -- The row's input cells by column id at enrolment (templates read the live row first).
  fields jsonb not null default '{}',
  sender_profile_id uuid references sender_profiles (id) on delete set null,
  status text not null default 'active' check (status in ('active', 'paused', 'failed', 'stopped', 'completed')),
  version integer not null,
  -- Where the contact stands in its version's graph; null before the first step is read.
  current_step_id text,
  -- Action steps already performed, by step id: a migration never repeats one.
  done_steps text[] not null default '{}',
  -- What the contact waits on now and until when (for people and the Temporal memo alike).
  wait_reason text,
  wait_until timestamptz,
  -- The wait step the until belongs to, so a retried activity keeps the same deadline.
  wait_step_id text,
  stop_reason text,
  error text,
  -- The pnet step the contact waits to settle.
  browser_step_id uuid,
  last_reached_at timestamptz,
  enrolled_at timestamptz not null default now(),
  finished_at timestamptz,
  revision integer not null default 1,
  updated_at timestamptz not null default now(),
  unique (workspace_id, contact_key),
  unique (sequence_id, row_id)
);
create index sequence_contacts_sequence on sequence_contacts (sequence_id, enrolled_at, id);
create index sequence_contacts_email on sequence_contacts (workspace_id, normalize_email(email)) where email is not null;
create index sequence_contacts_profile on sequence_contacts (workspace_id, normalize_profile_url(profile_url)) where profile_url is not null;

-- One outbound message of one contact's step: the approval queue and the at-most-once guard.
-- status: awaiting_approval -> approved | rejected; approved -> sending -> sent; any open -> stopped.
create table sequence_sends (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  sequence_id uuid not null references sequences (id) on delete cascade,
  contact_id uuid not null references sequence_contacts (id) on delete cascade,
  step_id text not null,
  version integer not null,
  channel text not null check (channel in ('email', 'pnet')),
  kind text not null,
  status text not null check (status in ('awaiting_approval', 'approved', 'rejected', 'sending', 'sent', 'stopped')),
  -- Why a message waits for a person (required segment empty, agent asked for review) or stopped.
  reason text,
  message_id text not null,
  to_email text,
  from_email text,
  subject text,
  body text not null default '',
  edited boolean not null default false,
  decided_by uuid,
  decided_at timestamptz,
  -- A send whose SMTP result was lost: counted as sent, never retried.
  unconfirmed boolean not null default false,
  sent_at timestamptz,
  opened_at timestamptz,
  -- The unguessable key of the email's open-tracking pixel (not the send's id: the pixel is public).
  open_token text not null default replace(gen_random_uuid()::text, '-', '') unique,
  browser_step_id uuid,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (contact_id, step_id),
  unique (message_id)
);
create index sequence_sends_queue on sequence_sends (workspace_id, created_at) where status = 'awaiting_approval';

-- Workspace outreach settings: the recontact cooldown.
create table sequence_settings (
  workspace_id uuid primary key references workspaces (id) on delete cascade,
  recontact_cooldown_days integer not null default 30 check (recontact_cooldown_days between 0 and 365),
  updated_at timestamptz not null default now()
);

-- The rest of a browser step's life: credit holds, cut-offs and resume, commit grants, holds by
-- paused contact or sequence, attempts and running waits; and the account's own checks
-- (replies, connections, checkpoint back-off) that its workflow schedules.

alter table pnet_accounts
  add column resume_enabled boolean not null default false,
  add column attempts_enabled boolean not null default false,
  -- A checkpoint the browser reported holds the account until this time (the back-off).
  add column checkpoint_until timestamptz,
  add column checkpoints_reported integer not null default 0,
  add column replies_failing boolean not null default false,
  add column replies_last_read_at timestamptz,
  add column connections_last_checked_at timestamptz,
  add column connections_next_check_at timestamptz,
  add column inbox_next_check_at timestamptz;

alter table browser_steps
  add column sequence_id uuid,
  -- Claims that lapsed with the browser silent; three end the step as interrupted_repeatedly.
  add column cut_offs integer not null default 0,
  -- When the browser was allowed past the point of no return under the current claim.
  add column commit_granted_at timestamptz,
  -- How the step's current queue round is paid for: one hold per round (a retry opens a new one).
  add column credit_round integer not null default 0,
  add column credit_hold_id uuid references credit_holds (id),
  add column running_wait jsonb,
  -- A step still waiting then fails with missed_window; its workflow owns the timer.
  add column run_before timestamptz;

create index browser_steps_contact on browser_steps (workspace_id, contact_key) where contact_key is not null;
create index browser_steps_sequence on browser_steps (workspace_id, sequence_id) where sequence_id is not null;

-- A paused contact or sequence: its waiting steps are held out of every browser's line.
create table pnet_step_holds (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  contact_key text,
  sequence_id uuid,
  reason text,
  created_at timestamptz not null default now(),
  check ((contact_key is null) <> (sequence_id is null))
);
create unique index pnet_step_holds_contact on pnet_step_holds (workspace_id, contact_key) where contact_key is not null;
create unique index pnet_step_holds_sequence on pnet_step_holds (workspace_id, sequence_id) where sequence_id is not null;

-- Whether a step of this contact or sequence is held now.
create function pnet_step_held(ws uuid, contact text, sequence uuid) returns boolean
language sql stable as $$
  select exists (
    select 1 from pnet_step_holds h
    where h.workspace_id = ws and (h.contact_key = contact or h.sequence_id = sequence))
$$;

-- Runs cut off without an error, and releases: they never count against the step.
create table pnet_step_attempts (
  id bigint generated always as identity primary key,
  step_id uuid not null references browser_steps (id) on delete cascade,
  claimed_at timestamptz not null,
  reason text not null,
  detail text,
  created_at timestamptz not null default now()
);
-- A report sent twice is recorded once.
create unique index pnet_step_attempts_once on pnet_step_attempts (step_id, claimed_at, reason);

-- Members a check_connections read found connected, and the stretches two reads did not overlap
-- (an acceptance there may have been missed).
create table pnet_connections (
  account_id uuid not null references pnet_accounts (id) on delete cascade,
  member_urn text not null,
  first_seen_at timestamptz not null default now(),
  primary key (account_id, member_urn)
);
create table pnet_connection_gaps (
  id bigint generated always as identity primary key,
  account_id uuid not null references pnet_accounts (id) on delete cascade,
  started_at timestamptz not null,
  ended_at timestamptz,
  problem text not null
);
create index pnet_connection_gaps_account on pnet_connection_gaps (account_id, id desc);

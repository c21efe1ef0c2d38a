-- Browser action steps (spec 2.2). The status column is the compare-and-set guard of every
-- transition; `claimed_at` names the current claim, so a result for an earlier one is refused.

create table browser_steps (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  account_id uuid not null references pnet_accounts (id) on delete cascade,
  kind text not null,
  params jsonb not null,
  contact_key text,
  status text not null check (status in
    ('awaiting_approval', 'queued', 'resuming', 'claimed', 'succeeded', 'failed', 'rejected', 'skipped', 'cancelled')),
  metered boolean not null default true,
  held boolean not null default false,
  reject_reason text,
  created_at timestamptz not null default now(),
  queued_at timestamptz,
  claimed_at timestamptz,
  finished_at timestamptz,
  duration_ms integer,
  error_code text,
  error_message text,
  outcome jsonb,
  acted_at timestamptz,
  -- The browser session holding the current claim, and the usage row the claim consumed (so a
  -- failure or a lapse returns exactly that unit, whatever the date is when it settles).
  claim_session_id uuid,
  usage_date date,
  usage_kind text,
  updated_at timestamptz not null default now()
);
-- A browser's line: an account's waiting steps, unmetered first, oldest first.
create index browser_steps_line on browser_steps (account_id, metered, queued_at)
  where status in ('queued', 'resuming') and not held;
create index browser_steps_workspace on browser_steps (workspace_id, created_at desc);
-- At most one running step per account, whatever races: the database says no to a second.
create unique index browser_steps_one_running on browser_steps (account_id) where status = 'claimed';

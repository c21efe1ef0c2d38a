-- The professional-network channel: sender profiles, their channel account, browser sessions
-- and per-day usage counters.

create table sender_profiles (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  name text not null check (length(name) between 1 and 255),
  timezone text not null default 'UTC',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (workspace_id, name)
);

create table pnet_accounts (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  sender_profile_id uuid not null unique references sender_profiles (id) on delete cascade,
  status text not null default 'pending' check (status in ('pending', 'connected', 'disconnected')),
  checkpoint_status text not null default 'ok' check (checkpoint_status in ('ok', 'checkpoint', 'restricted')),
  display_name text,
  headline text,
  photo_url text,
  vanity_name text,
  member_urn text,
  run_mode text not null default 'manual' check (run_mode in ('manual', 'automatic')),
  min_action_interval_seconds integer not null default 90,
  working_hours jsonb not null,
  limits jsonb not null,
  -- The connection token is derived (HMAC of the account id and version); only its hash is
  -- kept, to find the account from a browser's token.
  connection_token_hash bytea not null unique,
  connection_token_version integer not null default 1,
  connected_at timestamptz,
  last_seen_at timestamptz,
  -- One browser holds the lease; it lapses when the holder stops checking in.
  lease_session_id uuid,
  lease_nonce text,
  lease_expires_at timestamptz,
  -- The earliest the next metered step may be handed out: the last claim plus the gap and its jitter.
  next_metered_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index pnet_accounts_workspace on pnet_accounts (workspace_id);

-- Each browser that checked in with the account's token.
create table pnet_sessions (
  id uuid primary key default gen_random_uuid(),
  account_id uuid not null references pnet_accounts (id) on delete cascade,
  -- The id the extension generated for its browser profile.
  browser_id uuid not null,
  browser_label text not null,
  extension_version text not null,
  connected_at timestamptz not null default now(),
  last_seen_at timestamptz not null default now()
);
create unique index pnet_sessions_browser on pnet_sessions (account_id, browser_id);

-- Usage per account, local date and ceiling kind; consumed with a conditional upsert, so the
-- count "resets" at local midnight simply by a new date and no reset job exists.
create table pnet_usage (
  account_id uuid not null references pnet_accounts (id) on delete cascade,
  local_date date not null,
  limit_kind text not null,
  used integer not null default 0 check (used >= 0),
  primary key (account_id, local_date, limit_kind)
);

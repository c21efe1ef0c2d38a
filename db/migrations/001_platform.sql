-- Workspaces, members, API keys, the credit ledger and service settings.

create table workspaces (
  id uuid primary key default gen_random_uuid(),
  name text not null check (length(name) between 1 and 255),
  plan text not null check (plan in ('free', 'paid')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

create table members (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  idp_user_id text not null,
  display_name text not null,
  email text not null,
  role text not null check (role in ('admin', 'member')),
  created_at timestamptz not null default now(),
  unique (workspace_id, idp_user_id),
  unique (workspace_id, email)
);

create table api_keys (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  created_by uuid references members (id) on delete set null,
  name text not null check (length(name) between 1 and 255),
  scope text not null check (scope in ('read', 'write')),
  key_prefix text not null,
  key_hash bytea not null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  expire_at timestamptz,
  last_used_at timestamptz,
  deleted_at timestamptz
);
-- Authentication looks a key up by its hash alone.
create unique index api_keys_hash on api_keys (key_hash);
-- Names are unique among a workspace's live keys; a deleted key frees its name.
create unique index api_keys_name on api_keys (workspace_id, name) where deleted_at is null;

-- One row per movement of credits. The balance is the sum of the ledger; cause_key makes each
-- movement happen at most once, so a retried activity or request can never charge twice.
create table credit_ledger (
  id bigint generated always as identity primary key,
  workspace_id uuid not null references workspaces (id) on delete cascade,
  hold_id uuid,
  kind text not null check (kind in ('grant', 'hold', 'charge', 'release')),
  -- Credits moved, always positive; the kind says where: grant into available, hold from
  -- available to held, charge from held to spent, release from held back to available.
  amount bigint not null check (amount > 0),
  cause_key text not null,
  note text,
  created_at timestamptz not null default now(),
  unique (workspace_id, cause_key)
);
create index credit_ledger_workspace on credit_ledger (workspace_id, id desc);

-- A hold is credits set aside for an operation under way; it ends charged (in part or whole,
-- the rest released) or released. The status column is the compare-and-set guard.
create table credit_holds (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  amount bigint not null check (amount > 0),
  charged bigint not null default 0,
  status text not null default 'held' check (status in ('held', 'charged', 'released')),
  cause_key text not null,
  expires_at timestamptz not null,
  created_at timestamptz not null default now(),
  settled_at timestamptz,
  unique (workspace_id, cause_key)
);

-- The running balance, kept in the same transaction as each ledger row so a hold can lock it.
create table credit_balances (
  workspace_id uuid primary key references workspaces (id) on delete cascade,
  available bigint not null default 0 check (available >= 0),
  held bigint not null default 0 check (held >= 0),
  spent bigint not null default 0,
  updated_at timestamptz not null default now()
);

create table service_settings (
  key text primary key,
  value text not null,
  created_at timestamptz not null default now()
);

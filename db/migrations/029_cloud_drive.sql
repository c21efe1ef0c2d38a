-- The cloud-drive connection (one per workspace), its pending OAuth authorizations, and the
-- onboarding checklist's per-member dismissal.
--
-- Tokens are sealed by integrations/secrets/sealed.ts (AES-256-GCM, a key id in front so keys can
-- rotate) before they reach SQL: the columns hold `<key id>.<iv>.<ciphertext>.<tag>`, never a token.

create table cloud_drive_connections (
  workspace_id uuid primary key references workspaces (id) on delete cascade,
  account_email text,
  scopes text[] not null default '{}',
  access_token_sealed text not null,
  refresh_token_sealed text,
  expires_at timestamptz,
  connected_by uuid references members (id) on delete set null,
  connected_at timestamptz not null default now(),
  -- `reconnect_required` once the grant is revoked or expired (invalid_grant): only a person
  -- connecting again fixes it. last_error says what happened, in words a person can act on.
  status text not null default 'connected' check (status in ('connected', 'reconnect_required')),
  last_error text,
  updated_at timestamptz not null default now()
);

-- A pending authorization: the `state` sent to the provider (kept as its SHA-256, so the table
-- alone cannot complete a callback) and the PKCE verifier (sealed). Short-lived; used once.
create table cloud_drive_authorizations (
  state_hash bytea primary key,
  workspace_id uuid not null references workspaces (id) on delete cascade,
  member_id uuid references members (id) on delete set null,
  code_verifier_sealed text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null
);
create index cloud_drive_authorizations_expiry on cloud_drive_authorizations (expires_at);

-- A member who dismissed the onboarding checklist; restoring deletes the row.
create table onboarding_dismissals (
  workspace_id uuid not null references workspaces (id) on delete cascade,
  member_id uuid not null references members (id) on delete cascade,
  dismissed_at timestamptz not null default now(),
  primary key (workspace_id, member_id)
);

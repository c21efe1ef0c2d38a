-- Connected AI apps (spec 2.14, 5.6): the OAuth 2.1 authorization server in front of the MCP
-- endpoint. Clients come from dynamic registration (RFC 7591) or from a Client ID Metadata
-- Document (the client_id is an https URL the service reads). A person approves a pending
-- authorization request on the consent page; that makes a connected app (one workspace, one
-- member, `read` or `write`) and a one-time code. Codes, access tokens and refresh tokens are
-- stored as SHA-256 hashes only: the tables alone cannot be used to call anything.

create table oauth_clients (
  id uuid primary key default gen_random_uuid(),
  -- A dynamic client's generated id, or the metadata document's URL.
  client_id text not null unique check (length(client_id) between 1 and 2048),
  registration text not null check (registration in ('dynamic', 'metadata_document')),
  client_name text not null check (length(client_name) between 1 and 255),
  client_uri text,
  logo_uri text,
  software_id text,
  software_version text,
  redirect_uris text[] not null check (cardinality(redirect_uris) between 1 and 20),
  grant_types text[] not null default '{authorization_code,refresh_token}',
  token_endpoint_auth_method text not null default 'none'
    check (token_endpoint_auth_method in ('none', 'client_secret_post', 'client_secret_basic')),
  -- Only for a dynamic client registered as confidential; public clients (PKCE alone) have none.
  client_secret_hash bytea,
  -- The registration or document as received (for support; never trusted for decisions).
  metadata jsonb not null default '{}',
  brand text not null default 'other' check (brand in ('assistant_a', 'assistant_b', 'other')),
  recognised boolean not null default false,
  -- A metadata document is read again once this passes.
  fetched_at timestamptz,
  refresh_after timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

create table connected_apps (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  member_id uuid not null references members (id) on delete cascade,
  client_ref uuid not null references oauth_clients (id) on delete cascade,
  app_name text not null,
  brand text not null check (brand in ('assistant_a', 'assistant_b', 'other')),
  recognised boolean not null default false,
  redirect_host text not null,
  is_local boolean not null default false,
  -- What the person chose; a workspace not on the paid plan reads as `read` on every call.
  access text not null check (access in ('read', 'write')),
  created_at timestamptz not null default now(),
  last_used_at timestamptz,
  revoked_at timestamptz,
  revoked_by uuid references members (id) on delete set null
);
create index connected_apps_workspace on connected_apps (workspace_id, created_at desc, id desc);
create index connected_apps_member on connected_apps (member_id);

-- A pending authorization (the consent step): what the client asked for, until a person decides.
create table oauth_authorization_requests (
  id uuid primary key default gen_random_uuid(),
  client_ref uuid not null references oauth_clients (id) on delete cascade,
  redirect_uri text not null,
  state text,
  code_challenge text not null,
  code_challenge_method text not null check (code_challenge_method = 'S256'),
  -- RFC 8707: the one resource (the MCP endpoint) the tokens will be good for.
  resource text not null,
  scope text,
  status text not null default 'pending' check (status in ('pending', 'approved', 'denied')),
  decided_by uuid references members (id) on delete set null,
  decided_at timestamptz,
  app_id uuid references connected_apps (id) on delete cascade,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null
);
create index oauth_authorization_requests_expiry on oauth_authorization_requests (expires_at);

-- The one-time code an approval sends to the client's redirect. A second use is refused and
-- revokes every token the first use issued (used_at says it was spent).
create table oauth_authorization_codes (
  code_hash bytea primary key,
  request_id uuid not null unique references oauth_authorization_requests (id) on delete cascade,
  app_id uuid not null references connected_apps (id) on delete cascade,
  client_ref uuid not null references oauth_clients (id) on delete cascade,
  redirect_uri text not null,
  code_challenge text not null,
  resource text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  used_at timestamptz
);

-- Access and refresh tokens. Every token of one code shares code_hash (its rotation chain);
-- parent_hash names the refresh token a pair was rotated from. A refresh token is spent once
-- (used_at); showing a spent one again revokes its whole chain.
create table oauth_tokens (
  token_hash bytea primary key,
  kind text not null check (kind in ('access', 'refresh')),
  app_id uuid not null references connected_apps (id) on delete cascade,
  client_ref uuid not null references oauth_clients (id) on delete cascade,
  code_hash bytea not null references oauth_authorization_codes (code_hash) on delete cascade,
  parent_hash bytea,
  -- RFC 8707 audience: the resource the token was issued for; checked on every call.
  audience text not null,
  scope text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  used_at timestamptz,
  revoked_at timestamptz,
  revoked_reason text
);
create index oauth_tokens_app on oauth_tokens (app_id);
create index oauth_tokens_chain on oauth_tokens (code_hash);
create index oauth_tokens_expiry on oauth_tokens (expires_at);

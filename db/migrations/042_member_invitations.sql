-- Admins invite teammates by email (operationIds inviteMember, listInvitations, revokeInvitation,
-- acceptInvitation; docs/teams.md).
--
-- The invitation's secret goes out only in the email: the table keeps its SHA-256, as api_keys
-- does. Member ids (who invited, who revoked, who accepted) are values, not references, so the
-- history of an invitation stays whole after those members are removed.
--
-- An invitation is pending, accepted or revoked here; "expired" is read from expires_at and the
-- clock (domain/platform/invitations.ts). One that had expired when it was replaced by a new
-- invitation keeps reading as expired (revoked_at at or past expires_at).
create table member_invitations (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces (id) on delete cascade,
  email text not null check (email = lower(email) and length(email) between 3 and 254),
  role text not null check (role in ('admin', 'member')),
  token_hash bytea not null unique check (length(token_hash) = 32),
  invited_by uuid not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  accepted_at timestamptz,
  accepted_by_member_id uuid,
  revoked_at timestamptz,
  revoked_by uuid,
  check (expires_at > created_at),
  -- Accepted and revoked exclude each other, and each is written whole.
  check (accepted_at is null or revoked_at is null),
  check ((accepted_at is null) = (accepted_by_member_id is null)),
  check ((revoked_at is null) = (revoked_by is null)),
  -- Accepting decides on the same clock it writes: never at or past the expiry instant.
  check (accepted_at is null or accepted_at < expires_at)
);

-- At most one open invitation per address and workspace: inviting again revokes the open one in
-- the same transaction, and of two concurrent invitations the second finds this key taken.
create unique index member_invitations_open on member_invitations (workspace_id, email)
  where accepted_at is null and revoked_at is null;
-- The admins' list: per workspace, newest first.
create index member_invitations_workspace on member_invitations (workspace_id, created_at desc, id desc);

-- Admins change members' roles and remove members (docs/api.md, "Members").
--
-- A removed member's row is deleted (what referred to it is set null or goes with it, and every
-- credential reads the members table), so member_removals keeps who was removed: one row per
-- workspace and identity-provider user. A future path that lets people join by themselves must
-- refuse a user with a row here; only an operator's explicit add-member brings them back.
create table member_removals (
  workspace_id uuid not null references workspaces (id) on delete cascade,
  idp_user_id text not null,
  member_id uuid not null,
  email text not null,
  -- The admin who removed them (no foreign key: the record outlives that member too).
  removed_by uuid,
  removed_at timestamptz not null default now(),
  primary key (workspace_id, idp_user_id)
);

-- Who changed which member, and how, newest first per workspace. Member ids are kept as values,
-- not references, so the history of a removed member (or of the admin who acted) stays whole.
create table member_audit (
  id bigint generated always as identity primary key,
  workspace_id uuid not null references workspaces (id) on delete cascade,
  actor_member_id uuid,
  action text not null check (action in ('role_changed', 'removed')),
  target_member_id uuid not null,
  target_user_id text not null,
  target_email text not null,
  role_before text not null check (role_before in ('admin', 'member')),
  -- Null when the member was removed.
  role_after text check (role_after in ('admin', 'member')),
  created_at timestamptz not null default now(),
  check ((action = 'removed') = (role_after is null))
);
create index member_audit_workspace on member_audit (workspace_id, id desc);

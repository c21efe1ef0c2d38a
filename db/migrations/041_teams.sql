-- Teams through the identity provider (docs/teams.md).
--
-- A workspace may stand for one organisation of the identity provider: its tokens name the
-- organisation by the provider's own id, and a unique key makes two first requests of the same
-- new organisation create one workspace.
alter table workspaces add column external_org_id text;
create unique index workspaces_external_org on workspaces (external_org_id) where external_org_id is not null;

-- Who signed the workspace up (the provider's user id). A person whose tokens carry no
-- organisation signs up at most one workspace of their own: a retried sign-up is a 409, not a twin.
alter table workspaces add column signed_up_by text;
create unique index workspaces_personal_sign_up on workspaces (signed_up_by)
  where external_org_id is null and signed_up_by is not null;

-- Members joining (signing up, on first use of their organisation's token, or by an invitation)
-- are in the audit too. A join has no role before it.
alter table member_audit drop constraint member_audit_action_check;
alter table member_audit add constraint member_audit_action_check
  check (action in ('role_changed', 'removed', 'joined'));
alter table member_audit alter column role_before drop not null;
alter table member_audit add column joined_via text
  check (joined_via in ('sign_up', 'first_use', 'invitation'));
alter table member_audit add constraint member_audit_join_shape
  check ((action = 'joined') = (joined_via is not null) and (action = 'joined') = (role_before is null));

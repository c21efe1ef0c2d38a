-- Billing (issue 19): each workspace's account with the payment provider, the provider's events
-- (each recorded once; the record and every money movement it causes commit together), invoices,
-- payments, the per-period credit grants, referrals and the design-partner program.

-- Credits taken back when the money that bought them is refunded or disputed: from available,
-- never below zero (what was already spent stays spent and the note says so).
alter table credit_ledger drop constraint credit_ledger_kind_check;
alter table credit_ledger add constraint credit_ledger_kind_check
  check (kind in ('grant', 'hold', 'charge', 'release', 'revoke'));

create table billing_accounts (
  workspace_id uuid primary key references workspaces (id) on delete cascade,
  -- The provider's ids (Stripe cus_…, sub_…); null until the workspace first goes to checkout.
  customer_id text unique,
  subscription_id text unique,
  subscription_status text,
  -- `created` of the newest subscription event applied: an older event arriving late changes nothing.
  subscription_event_at timestamptz,
  current_period_end timestamptz,
  cancel_at_period_end boolean not null default false,
  -- A failed renewal keeps the plan until grace_ends_at; a paid invoice clears both.
  payment_failed_at timestamptz,
  grace_ends_at timestamptz,
  -- Grant periods are months counted from the anchor (an upgrade moves it to the subscription's start).
  grant_anchor timestamptz not null,
  referral_code text not null unique,
  -- Attributed once, when the workspace is created through a referral link.
  referred_by uuid references workspaces (id) on delete set null,
  -- When its billing workflow (workspace-billing/<id>: grants, grace and period ends) was started.
  workflow_started_at timestamptz,
  updated_at timestamptz not null default now()
);

insert into billing_accounts (workspace_id, grant_anchor, referral_code)
select id, created_at, substr(replace(gen_random_uuid()::text, '-', ''), 1, 10) from workspaces;

-- One row per provider event id: the insert is the "handled once" guard.
create table billing_events (
  event_id text primary key,
  type text not null,
  workspace_id uuid references workspaces (id) on delete set null,
  occurred_at timestamptz not null,
  received_at timestamptz not null default now(),
  -- What handling it did, for an operator reading the table ("granted 1000 credits", "stale: ignored").
  outcome text not null
);
create index billing_events_workspace on billing_events (workspace_id, occurred_at desc);

create table billing_invoices (
  invoice_id text primary key,
  workspace_id uuid not null references workspaces (id) on delete cascade,
  status text not null check (status in ('open', 'paid', 'payment_failed', 'void', 'uncollectible')),
  amount_due_cents bigint not null check (amount_due_cents >= 0),
  amount_paid_cents bigint not null default 0 check (amount_paid_cents >= 0),
  currency text not null check (currency ~ '^[a-z]{3}$'),
  period_start timestamptz,
  period_end timestamptz,
  hosted_invoice_url text,
  created_at timestamptz not null,
  paid_at timestamptz
);
create index billing_invoices_workspace on billing_invoices (workspace_id, created_at desc);

-- A payment is keyed by the provider's payment intent (or the invoice when it carries none).
create table billing_payments (
  payment_id text primary key,
  workspace_id uuid not null references workspaces (id) on delete cascade,
  purpose text not null check (purpose in ('subscription', 'credit_pack')),
  invoice_id text,
  pack text,
  credits bigint not null default 0 check (credits >= 0),
  amount_cents bigint not null check (amount_cents >= 0),
  refunded_cents bigint not null default 0 check (refunded_cents >= 0),
  currency text not null check (currency ~ '^[a-z]{3}$'),
  -- Credits of a pack taken back by refunds and open disputes, so a second refund event takes only the rest.
  revoked_credits bigint not null default 0 check (revoked_credits >= 0),
  dispute_status text check (dispute_status in ('open', 'won', 'lost')),
  created_at timestamptz not null
);
create index billing_payments_workspace on billing_payments (workspace_id, created_at desc);

create table design_partner_applications (
  workspace_id uuid primary key references workspaces (id) on delete cascade,
  status text not null default 'pending' check (status in ('pending', 'accepted', 'declined', 'ended')),
  company_website text not null,
  use_case text not null,
  team_size int not null check (team_size between 1 and 100000),
  applied_by uuid references members (id) on delete set null,
  decided_at timestamptz,
  decision_note text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

-- Affiliate payouts (issue 20, spec 2.17, 3.5, 3.6; decision 044): the program-wide pause, each
-- affiliate's payout settings and gates, provider batches, and one payout per affiliate and period.
--
-- A payout's money leaves the affiliate's balance in the same transaction that creates the payout
-- (a `payout` ledger row, cause `payout:<id>`), and comes back in the transaction that marks it
-- returned or failed (an `adjustment`, cause `payout-returned:<id>` / `payout-failed:<id>`).
-- Statuses (3.5): held -> created -> paid | unclaimed -> returned; held | created | unclaimed -> failed.

-- The program-wide pause (next_payout_status `paused`): one row.
create table affiliate_payout_program (
  id boolean primary key default true check (id),
  paused boolean not null default false,
  note text,
  updated_at timestamptz not null default now()
);
insert into affiliate_payout_program (id) values (true);

-- The gates an operator or the affiliate sets. No row: no payout email, identity not verified.
create table affiliate_payout_settings (
  affiliate_id uuid primary key references affiliates (id) on delete cascade,
  workspace_id uuid not null references workspaces (id) on delete cascade,
  payout_email text check (payout_email is null or char_length(payout_email) between 3 and 254),
  identity_verified boolean not null default false,
  identity_verified_at timestamptz,
  -- The payout destination is held: a payout to it came back (returned unclaimed or failed), or an
  -- operator held it. Changing the payout email (or an operator) lifts it. A hold from a return left
  -- standing past the forfeiture period forfeits the available balance.
  destination_hold boolean not null default false,
  destination_hold_reason text check (destination_hold_reason in ('returned', 'failed', 'operator')),
  destination_hold_since timestamptz,
  under_review boolean not null default false,
  blocked boolean not null default false,
  unavailable boolean not null default false,
  note text,
  updated_at timestamptz not null default now()
);

-- A batch sent to the provider. The sender batch id is the provider's idempotency key: a batch
-- is sent again (after a crash or a lost answer) under the same id with the same items.
create table affiliate_payout_batches (
  id uuid primary key default gen_random_uuid(),
  sender_batch_id text not null unique,
  period text not null,
  -- open: items assigned, not yet accepted; sent: the provider has it; refused: 422, its items went back or failed.
  status text not null default 'open' check (status in ('open', 'sent', 'refused')),
  provider_batch_id text unique,
  created_at timestamptz not null default now(),
  sent_at timestamptz
);
create index affiliate_payout_batches_open on affiliate_payout_batches (period) where status = 'open';

create table affiliate_payouts (
  id uuid primary key default gen_random_uuid(),
  affiliate_id uuid not null references affiliates (id) on delete cascade,
  workspace_id uuid not null references workspaces (id) on delete cascade,
  -- The UTC month of the cycle that made it (YYYY-MM): one payout per affiliate and period.
  period text not null check (period ~ '^[0-9]{4}-[0-9]{2}$'),
  amount_cents bigint not null check (amount_cents > 0),
  currency text not null default 'usd',
  status text not null default 'held' check (status in ('held', 'created', 'paid', 'unclaimed', 'returned', 'failed')),
  receiver_email text not null,
  batch_id uuid references affiliate_payout_batches (id),
  provider_item_id text,
  provider_status text,
  failure_reason text,
  created_at timestamptz not null default now(),
  sent_at timestamptz,
  paid_at timestamptz,
  unclaimed_at timestamptz,
  returned_at timestamptz,
  failed_at timestamptz,
  updated_at timestamptz not null default now(),
  unique (affiliate_id, period)
);
create index affiliate_payouts_affiliate on affiliate_payouts (affiliate_id, created_at desc, id desc);
create index affiliate_payouts_unsent on affiliate_payouts (period, created_at) where status = 'held' and batch_id is null;
create index affiliate_payouts_batch on affiliate_payouts (batch_id);
create index affiliate_payouts_open on affiliate_payouts (batch_id) where status in ('created', 'unclaimed');

-- The affiliate program (issue 20, spec 2.17): one affiliate per workspace, its codes, counted
-- clicks, the workspaces it brought (signup, then conversion at the first payment), a commission
-- per paid invoice of a converted workspace, and the affiliate's money ledger (signed USD cents).
-- Payouts and payout settings are 036's.
--
-- Every money movement is a ledger row with a unique cause key, so a redelivered event, a retried
-- activity or a killed worker never credits twice. available + held always equals the ledger's sum:
-- a row is either held (a commission still in its holding period, with whatever clawback or
-- reversal touched it while it was held) or not.

create table affiliates (
  id uuid primary key default gen_random_uuid(),
  -- One affiliate per workspace (the workspace is paid; its members share it).
  workspace_id uuid not null unique references workspaces (id) on delete cascade,
  display_name text not null check (char_length(display_name) between 1 and 255),
  -- Days of daily stats and of the performance window are counted in this IANA zone.
  time_zone text not null default 'UTC',
  created_at timestamptz not null default now()
);

create table affiliate_codes (
  id uuid primary key default gen_random_uuid(),
  affiliate_id uuid not null references affiliates (id) on delete cascade,
  workspace_id uuid not null references workspaces (id) on delete cascade,
  code text not null check (char_length(code) between 3 and 64),
  is_vanity boolean not null,
  created_at timestamptz not null default now()
);
-- Unique across the service, whatever the case.
create unique index affiliate_codes_code on affiliate_codes (lower(code));
create index affiliate_codes_affiliate on affiliate_codes (affiliate_id, created_at);

-- One row per visitor, affiliate and day (the affiliate's day): a repeated click (of any of its
-- codes) only bumps `hits`, so the counted clicks of a day are the rows and recording a click stays
-- one upsert. Bots are not recorded. `code_id` is the code of the day's first click.
create table affiliate_clicks (
  id uuid primary key default gen_random_uuid(),
  affiliate_id uuid not null references affiliates (id) on delete cascade,
  code_id uuid not null references affiliate_codes (id) on delete cascade,
  visitor_key text not null,
  day date not null,
  hits int not null default 1,
  clicked_at timestamptz not null default now(),
  unique (affiliate_id, visitor_key, day)
);

-- A workspace is attributed once (its signup); its conversion is its first payment.
create table affiliate_attributions (
  workspace_id uuid primary key references workspaces (id) on delete cascade,
  affiliate_id uuid not null references affiliates (id) on delete cascade,
  code_id uuid references affiliate_codes (id) on delete set null,
  click_id uuid references affiliate_clicks (id) on delete set null,
  signed_up_at timestamptz not null default now(),
  signup_day date not null,
  converted_at timestamptz,
  conversion_day date,
  conversion_invoice_id text
);
create index affiliate_attributions_affiliate on affiliate_attributions (affiliate_id, signed_up_at);
create index affiliate_attributions_converted on affiliate_attributions (affiliate_id, converted_at) where converted_at is not null;

-- A commission per paid invoice of a converted workspace within the commission months.
-- status: held (in its holding period) -> available (matured at available_at) or clawed_back
-- (fully refunded inside the holding period, or a dispute lost). Moves are compare-and-set.
create table affiliate_commissions (
  id uuid primary key default gen_random_uuid(),
  affiliate_id uuid not null references affiliates (id) on delete cascade,
  workspace_id uuid not null references workspaces (id) on delete cascade,
  invoice_id text not null unique,
  payment_id text not null,
  invoice_cents bigint not null check (invoice_cents > 0),
  amount_cents bigint not null check (amount_cents >= 0),
  status text not null default 'held' check (status in ('held', 'available', 'clawed_back')),
  earned_at timestamptz not null,
  earned_day date not null,
  available_at timestamptz not null,
  matured_at timestamptz,
  -- What refunds inside the window took back so far (cumulative, so a repeated refund event takes only the rest).
  refund_clawed_cents bigint not null default 0 check (refund_clawed_cents >= 0),
  dispute_status text check (dispute_status in ('open', 'won', 'lost')),
  -- What the open (or lost) dispute took back; a won dispute gives exactly this back.
  dispute_clawed_cents bigint not null default 0 check (dispute_clawed_cents >= 0),
  workflow_started_at timestamptz,
  created_at timestamptz not null default now()
);
create index affiliate_commissions_payment on affiliate_commissions (payment_id);
create index affiliate_commissions_affiliate on affiliate_commissions (affiliate_id, earned_at);
create index affiliate_commissions_due on affiliate_commissions (affiliate_id, available_at) where status = 'held';
create index affiliate_commissions_unstarted on affiliate_commissions (created_at) where workflow_started_at is null;

create table affiliate_ledger (
  id uuid primary key default gen_random_uuid(),
  affiliate_id uuid not null references affiliates (id) on delete cascade,
  kind text not null check (kind in ('commission', 'clawback_refund', 'clawback_dispute', 'dispute_reversal', 'payout', 'adjustment', 'forfeiture')),
  amount_cents bigint not null,
  currency text not null default 'usd',
  description text not null,
  -- 'commission:<invoice>', 'refund:<payment>:<refunded cents>', 'dispute:<commission>:open', ...
  cause_key text not null unique,
  commission_id uuid references affiliate_commissions (id) on delete set null,
  -- Counted in held_cents, not available, until its commission matures (then false, in the same transaction).
  held boolean not null default false,
  available_at timestamptz,
  occurred_at timestamptz not null default now()
);
create index affiliate_ledger_affiliate on affiliate_ledger (affiliate_id, occurred_at desc, id desc);
create index affiliate_ledger_commission on affiliate_ledger (commission_id) where held;

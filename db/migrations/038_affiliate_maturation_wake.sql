-- Issue 20 (decision 047): commissions mature in a few long-lived workflows, one per maturation
-- shard (`commission-maturation/<shard>`), instead of one workflow per commission. A commission's
-- shard follows from its affiliate (so an affiliate's commissions are always matured by the same
-- workflow); `affiliate_maturation_shards.wake_at` is when the shard's workflow will next look,
-- written by its activity in the transaction that matured what was due (null when nothing is held
-- and the workflow ended). A webhook signals a shard only when that is null or later than a new
-- commission's available_at; the worker's sweeper signals a shard whose held commissions it does
-- not cover (a wake lost with a crash). The per-commission workflow's start record goes with it.
drop index affiliate_commissions_unstarted;
alter table affiliate_commissions drop column workflow_started_at;
alter table affiliate_commissions
  add column maturation_shard smallint not null generated always as (hashtext(affiliate_id::text) & 7) stored;
create index affiliate_commissions_shard_due on affiliate_commissions (maturation_shard, available_at) where status = 'held';

create table affiliate_maturation_shards (
  shard smallint primary key check (shard between 0 and 7),
  wake_at timestamptz
);
insert into affiliate_maturation_shards (shard) select generate_series(0, 7);

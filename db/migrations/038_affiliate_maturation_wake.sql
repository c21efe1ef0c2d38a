-- Issue 20 (decision 047): one maturation workflow per affiliate (`affiliate-maturation/<id>`)
-- replaces one per commission. `maturation_wake_at` is when the affiliate's workflow will next
-- look, written by its activity in the transaction that matured what was due (null when nothing
-- is held and the workflow ended). A new commission's webhook signals the workflow only when this
-- is null or later than the commission's available_at; the worker's sweeper signals an affiliate
-- whose held commissions this does not cover (a wake lost with a crash). The per-commission
-- workflow's start record goes with that workflow.
alter table affiliates add column maturation_wake_at timestamptz;
drop index affiliate_commissions_unstarted;
alter table affiliate_commissions drop column workflow_started_at;

-- Every check-in counts its account's line (api/pnet-line.ts). Without an index by account that
-- count read the whole table; settled steps pile up forever, so this one holds only live steps.
create index browser_steps_live on browser_steps (account_id, status) include (held, metered)
  where status in ('awaiting_approval', 'queued', 'resuming', 'claimed');

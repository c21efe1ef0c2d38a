-- A running browser's check-ins renew its claim's lease here instead of signalling the step's
-- workflow: the workflow's lease timer reads this when it fires and sleeps on to the renewed end,
-- so a step that runs for minutes costs Temporal one look per lease, not one signal per check-in.
alter table browser_steps add column lease_renewed_at timestamptz;

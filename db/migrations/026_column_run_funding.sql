-- A run an assistant card paid for: the card held its quote before the run started, so the run's
-- rows take no holds of their own; the run counts what its results cost and the card charges that
-- from its hold, up to the quote, and returns the rest.
alter table column_runs add column funding_hold_id uuid references credit_holds (id);

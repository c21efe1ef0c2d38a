-- A tool card's call of a non-idempotent operation (a POST) is made at most once: the card notes
-- the moment it started, so a retry after a crash mid-call fails the card with why, instead of
-- calling again and creating the thing twice.
alter table assistant_proposals add column call_started_at timestamptz;

-- Every check-in rewrites its account's row and its session's row (presence, lease). With full
-- pages the new version lands on another page and every index of the table gets an entry for it;
-- with room left on the page it stays there (a HOT update: no index is touched, since a check-in
-- changes no indexed column). Rows written from now on leave that room; the rows already stored
-- gain it as their pages are rewritten.
alter table pnet_accounts set (fillfactor = 50);
alter table pnet_sessions set (fillfactor = 60);

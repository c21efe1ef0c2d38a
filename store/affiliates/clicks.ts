/** The public click route's one write: a visitor's click, counted once per affiliate and day (the affiliate's day). */
import type { Db } from '../../db/sql.js';

/**
 * Records a click on a code (any case) in one statement: the first of the visitor's day inserts a
 * row, a repeat only bumps its `hits`. Answers the row's id (the click id a signup can name), or
 * null for a code no one has.
 */
export async function recordClick(
  db: Db,
  code: string,
  visitorKey: string,
): Promise<{ id: string; counted: boolean } | null> {
  const [row] = await db<{ id: string; counted: boolean }[]>`
    insert into affiliate_clicks (affiliate_id, code_id, visitor_key, day)
    select c.affiliate_id, c.id, ${visitorKey}, (now() at time zone a.time_zone)::date
      from affiliate_codes c join affiliates a on a.id = c.affiliate_id
     where lower(c.code) = lower(${code})
    on conflict (affiliate_id, visitor_key, day) do update set hits = affiliate_clicks.hits + 1
    returning id, (xmax = 0) as counted`;
  return row ?? null;
}

/** A click by its id, with its affiliate: what a signup within the cookie window is attributed to. */
export async function clickById(
  db: Db,
  clickId: string,
): Promise<{ id: string; affiliate_id: string; code_id: string; clicked_at: Date } | undefined> {
  const [row] = await db<{ id: string; affiliate_id: string; code_id: string; clicked_at: Date }[]>`
    select id, affiliate_id, code_id, clicked_at from affiliate_clicks where id = ${clickId}`;
  return row;
}

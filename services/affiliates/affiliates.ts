/**
 * The affiliate program's use cases (decision 043; interface spec: Affiliate program): enrolment,
 * codes, clicks, signups, and the reads.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Db, Sql } from '../../db/sql.js';
import {
  commissionMonths,
  commissionPercent,
  generatedCode,
  isBot,
  maturitiesByDay,
  pageBounds,
  ratio,
  trend,
  withinCookieWindow,
} from '../../domain/affiliates/affiliates.js';
import { ApiError } from '../../domain/shared/errors.js';
import { addDays, formatLocalDate, localDate } from '../../domain/shared/zoned-time.js';
import type { AffiliateSettings } from '../../integrations/config.js';
import {
  affiliateCodes,
  affiliateOfWorkspace,
  codeByText,
  countVanityCodes,
  insertAffiliate,
  insertAffiliateCode,
  type AffiliateCodeRow,
  type AffiliateRow,
} from '../../store/affiliates/affiliates.js';
import { clickById, recordClick } from '../../store/affiliates/clicks.js';
import { attributeSignup } from '../../store/affiliates/commissions.js';
import { affiliateBalances, ledgerPage } from '../../store/affiliates/ledger.js';
import { dailyStats, feedPage, heldByDay, lifetime, windowSums } from '../../store/affiliates/reads.js';

/** Vanity codes one affiliate may have (besides its generated code). */
export const maxVanityCodes = 10;

const notEnrolled = () =>
  new ApiError('not_found', 'This workspace is not enrolled in the affiliate program; enrol with POST /affiliate/.');

export async function requireAffiliate(db: Db, workspaceId: string): Promise<AffiliateRow> {
  const affiliate = await affiliateOfWorkspace(db, workspaceId);
  if (!affiliate) throw notEnrolled();
  return affiliate;
}

const codeView = (c: AffiliateCodeRow) => ({
  code: c.code,
  is_vanity: c.is_vanity,
  created_at: c.created_at.toISOString(),
});

export async function affiliateView(db: Db, settings: AffiliateSettings, affiliate: AffiliateRow) {
  const [codes, balances] = await Promise.all([affiliateCodes(db, affiliate.id), affiliateBalances(db, affiliate.id)]);
  return {
    id: affiliate.id,
    display_name: affiliate.display_name,
    time_zone: affiliate.time_zone,
    created_at: affiliate.created_at.toISOString(),
    codes: codes.map(codeView),
    available_cents: balances.availableCents,
    held_cents: balances.heldCents,
    commission_percent: commissionPercent,
    commission_months: commissionMonths,
    holding_days: settings.holdingMs / 86_400_000,
    cookie_window_days: settings.cookieWindowDays,
  };
}

/** Enrols the workspace with a generated code; a second enrolment is refused (409). */
export async function enrol(
  sql: Sql,
  settings: AffiliateSettings,
  workspaceId: string,
  body: { display_name: string; time_zone?: string | undefined },
) {
  const affiliate = await sql.begin(async (tx) => {
    const { affiliate, created } = await insertAffiliate(tx, {
      workspaceId,
      displayName: body.display_name,
      timeZone: body.time_zone ?? 'UTC',
    });
    if (!created) throw new ApiError('conflict', 'This workspace is enrolled already; read it with GET /affiliate/.');
    // A generated code taken already (8 characters of 31: rare) is drawn again.
    for (let i = 0; i < 5; i += 1) {
      if (
        await insertAffiliateCode(tx, {
          affiliateId: affiliate.id,
          workspaceId,
          code: generatedCode(randomBytes(8)),
          isVanity: false,
        })
      )
        return affiliate;
    }
    throw new ApiError('internal', 'No free code could be generated; try again.');
  });
  return affiliateView(sql, settings, affiliate);
}

export async function listCodes(db: Db, workspaceId: string) {
  const affiliate = await requireAffiliate(db, workspaceId);
  return (await affiliateCodes(db, affiliate.id)).map(codeView);
}

/** A vanity code: unique across the service whatever the case (409 when taken), at most `maxVanityCodes` per affiliate (409). */
export async function createVanityCode(sql: Sql, workspaceId: string, code: string) {
  const affiliate = await requireAffiliate(sql, workspaceId);
  if ((await countVanityCodes(sql, affiliate.id)) >= maxVanityCodes)
    throw new ApiError('conflict', `An affiliate has at most ${maxVanityCodes} vanity codes.`);
  const row = await insertAffiliateCode(sql, { affiliateId: affiliate.id, workspaceId, code, isVanity: true });
  if (!row) throw new ApiError('conflict', `The code "${code}" is taken (codes are unique whatever their case).`);
  return codeView(row);
}

/**
 * A click on the public link: counted once per visitor, affiliate and day; bots are redirected
 * and not counted. The visitor is the id the landing page passes, else its address and user agent.
 * Answers the click id (null for a bot) or a 404 for a code no one has.
 */
export async function clickThrough(
  db: Db,
  code: string,
  visitor: { id?: string | undefined; ip: string; userAgent: string | undefined },
): Promise<{ clickId: string | null; counted: boolean }> {
  if (isBot(visitor.userAgent)) {
    if (!(await codeByText(db, code))) throw new ApiError('not_found', 'No affiliate has this code.');
    return { clickId: null, counted: false };
  }
  const key = visitor.id
    ? `v:${visitor.id}`
    : `a:${createHash('sha256')
        .update(`${visitor.ip}\n${visitor.userAgent ?? ''}`)
        .digest('base64url')
        .slice(0, 22)}`;
  const click = await recordClick(db, code, key);
  if (!click) throw new ApiError('not_found', 'No affiliate has this code.');
  return { clickId: click.id, counted: click.counted };
}

/**
 * Attributes a new workspace's signup (inside the transaction that creates it): by a click id within
 * the cookie window, else by a code. Answers whether it was attributed; a code no one has, an
 * unknown click or one past the window is refused with 422 so the operator hears of it.
 */
export async function attributeNewWorkspace(
  tx: Db,
  input: {
    workspaceId: string;
    code?: string | undefined;
    clickId?: string | undefined;
    at: Date;
    cookieWindowDays: number;
  },
): Promise<void> {
  if (input.clickId) {
    const click = /^[0-9a-f-]{36}$/i.test(input.clickId) ? await clickById(tx, input.clickId) : undefined;
    if (!click) throw new ApiError('unprocessable', `No affiliate click has the id "${input.clickId}".`);
    if (!withinCookieWindow(click.clicked_at, input.at, input.cookieWindowDays)) {
      throw new ApiError(
        'unprocessable',
        `The affiliate click is older than the ${input.cookieWindowDays}-day window.`,
      );
    }
    await attributeSignup(tx, {
      workspaceId: input.workspaceId,
      affiliateId: click.affiliate_id,
      codeId: click.code_id,
      clickId: click.id,
      at: input.at,
    });
    return;
  }
  if (!input.code) return;
  const code = await codeByText(tx, input.code);
  if (!code) throw new ApiError('unprocessable', `No affiliate has the code "${input.code}".`);
  if (code.workspace_id === input.workspaceId) return;
  await attributeSignup(tx, {
    workspaceId: input.workspaceId,
    affiliateId: code.affiliate_id,
    codeId: code.id,
    clickId: null,
    at: input.at,
  });
}

const today = (affiliate: AffiliateRow, now: Date) => localDate(now, affiliate.time_zone);

export async function affiliateDailyStats(db: Db, workspaceId: string, days: number, now: Date) {
  const affiliate = await requireAffiliate(db, workspaceId);
  const to = today(affiliate, now);
  return dailyStats(db, affiliate.id, formatLocalDate(addDays(to, -(days - 1))), formatLocalDate(to));
}

const nextOffset = (rows: number, limit: number, offset: number) => (rows < limit ? null : offset + limit);

export async function affiliateFeed(db: Db, workspaceId: string, limit: number = pageBounds.default, offset = 0) {
  const affiliate = await requireAffiliate(db, workspaceId);
  const rows = await feedPage(db, affiliate.id, limit, offset);
  return {
    items: rows.map((r) => ({ kind: r.kind, occurred_at: r.occurred_at.toISOString(), amount_cents: r.amount_cents })),
    next_offset: nextOffset(rows.length, limit, offset),
  };
}

export async function affiliateLedger(db: Db, workspaceId: string, limit: number = pageBounds.default, offset = 0) {
  const affiliate = await requireAffiliate(db, workspaceId);
  const rows = await ledgerPage(db, affiliate.id, { limit, offset });
  return {
    entries: rows.map((r) => ({
      id: r.id,
      kind: r.kind,
      amount_cents: r.amount_cents,
      currency: r.currency,
      description: r.description,
      occurred_at: r.occurred_at.toISOString(),
      available_at: r.available_at?.toISOString() ?? null,
    })),
    next_offset: nextOffset(rows.length, limit, offset),
  };
}

async function maturitiesOf(db: Db, affiliate: AffiliateRow) {
  const [balances, held] = await Promise.all([
    affiliateBalances(db, affiliate.id),
    heldByDay(db, affiliate.id, affiliate.time_zone),
  ]);
  return {
    balances,
    maturities: maturitiesByDay(
      balances.availableCents,
      held.map((h) => ({ day: h.day, amountCents: h.amount_cents })),
    ),
  };
}

export async function affiliateMaturities(db: Db, workspaceId: string) {
  const affiliate = await requireAffiliate(db, workspaceId);
  return { maturities: (await maturitiesOf(db, affiliate)).maturities };
}

/** The performance window's fields other than the next payout's (those come from the payout gates). */
export async function affiliatePerformanceCore(db: Db, affiliate: AffiliateRow, days: number, now: Date) {
  const to = today(affiliate, now);
  const from = addDays(to, -(days - 1));
  const [current, previous, life, m] = await Promise.all([
    windowSums(db, affiliate.id, formatLocalDate(from), formatLocalDate(to)),
    windowSums(db, affiliate.id, formatLocalDate(addDays(from, -days)), formatLocalDate(addDays(from, -1))),
    lifetime(db, affiliate.id, commissionMonths, now),
    maturitiesOf(db, affiliate),
  ]);
  const iso = (d: Date | null) => d?.toISOString() ?? null;
  return {
    active_count: current.active_count,
    average_commission_cents: current.commissions === 0 ? null : Math.floor(current.earned_cents / current.commissions),
    clicks: trend(current.clicks, previous.clicks),
    conversions: trend(current.conversions, previous.conversions),
    earned_cents: trend(current.earned_cents, previous.earned_cents),
    signups: trend(current.signups, previous.signups),
    conversion_rate: ratio(current.conversions, current.signups),
    days,
    epc_cents: current.clicks === 0 ? null : Math.floor(current.earned_cents / current.clicks),
    held_cents: m.balances.heldCents,
    last_commission_at: iso(life.last_commission_at),
    last_conversion_at: iso(life.last_conversion_at),
    last_signup_at: iso(life.last_signup_at),
    lifetime_clawed_back_cents: life.clawed_back_cents,
    lifetime_gross_cents: life.gross_cents,
    lifetime_net_cents: life.gross_cents - life.clawed_back_cents,
    never_paid_count: life.never_paid_count,
    signup_rate: ratio(current.signups, current.clicks),
    upcoming_maturities: m.maturities,
    window_closed_count: life.window_closed_count,
  };
}

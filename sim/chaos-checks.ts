/**
 * The invariants a pnet run must keep, checked from three independent sources: the rows in
 * Postgres, what the simulated browsers were answered (SimLog), and claims a poller saw in the
 * database. Each check answers its counts and its violations; nothing here writes.
 */
import type { Db } from '../db/sql.js';
import { backendErrorCodes, type StepErrorCode } from '../domain/pnet/steps.js';
import type { ClaimRecord, SimLog } from './sim-log.js';

export interface CheckResult {
  name: string;
  ok: boolean;
  /** One or two lines of counts, printed whether or not the check passed. */
  summary: string;
  violations: string[];
  /** Worth a look but not a violation of the invariant checked. */
  notes: string[];
}

export interface StepRowLite {
  id: string;
  account_id: string;
  kind: string;
  metered: boolean;
  status: string;
  held: boolean;
  claimed_at: Date | null;
  finished_at: Date | null;
  error_code: string | null;
}

/** A claim seen in the database by the poller: the step was `claimed` under it from firstSeen to lastSeen. */
export interface ObservedClaim {
  stepId: string;
  accountId: string;
  claimedAt: number;
  firstSeen: number;
  lastSeen: number;
}

export const terminalStatuses = new Set(['succeeded', 'failed', 'skipped', 'rejected', 'cancelled']);
/** Error codes the backend writes itself, when a step settles without the browser's result. */

const claimKey = (stepId: string, claimedAt: number) => `${stepId}@${claimedAt}`;
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const shortId = (id: string) => id.slice(0, 8);

function result(name: string, summary: string, violations: string[], notes: string[] = []): CheckResult {
  return { name, ok: violations.length === 0, summary, violations, notes };
}

function countBy<T>(items: T[], key: (item: T) => string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const item of items) counts.set(key(item), (counts.get(key(item)) ?? 0) + 1);
  return counts;
}

const formatCounts = (counts: Map<string, number>) =>
  [...counts]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');

/** Every step terminal, or waiting in line (queued or resuming) with nobody holding a claim on it. */
export function checkLine(rows: StepRowLite[], log?: SimLog): CheckResult {
  const violations: string[] = [];
  for (const row of rows) {
    if (terminalStatuses.has(row.status)) continue;
    if (row.status === 'queued' || row.status === 'resuming') continue;
    const given =
      row.claimed_at && log?.claims.find((c) => c.stepId === row.id && c.claimedAt === row.claimed_at!.getTime());
    const whose =
      row.status !== 'claimed' || !log
        ? ''
        : given
          ? ` (its claim went to ${given.browser}, which ${given.fate === 'running' ? 'still runs it' : `ended it: ${given.fate}`})`
          : ` by a claim no browser was given (claimed_at ${row.claimed_at?.toISOString()}); nothing will renew or lapse it`;
    violations.push(`step ${shortId(row.id)} (${row.kind}) is ${row.status} at the end${whose}`);
  }
  const byStatus = countBy(rows, (r) => (r.status === 'failed' && r.error_code ? `failed/${r.error_code}` : r.status));
  return result(
    'every step terminal or correctly queued',
    `${rows.length} steps: ${formatCounts(byStatus)}`,
    violations,
  );
}

/**
 * Exactly one settle per step: every 200 any browser got for a step describes the same settle
 * (status and finish time), and that settle is the row's.
 */
export function checkSettles(log: SimLog, rows: StepRowLite[]): CheckResult {
  const violations: string[] = [];
  const notes: string[] = [];
  const byId = new Map(rows.map((r) => [r.id, r]));
  const accepted = new Map<string, Set<string>>();
  for (const report of log.reports) {
    if (report.http !== 200 || !report.answer) continue;
    const settles = accepted.get(report.stepId) ?? new Set<string>();
    settles.add(`${report.answer.status} at ${report.answer.finished_at}`);
    accepted.set(report.stepId, settles);
  }
  for (const [stepId, settles] of accepted) {
    if (settles.size > 1)
      violations.push(`step ${shortId(stepId)} was settled more than once: ${[...settles].join(' / ')}`);
    const row = byId.get(stepId);
    const [only] = settles;
    const rowSettle =
      row && row.finished_at
        ? `${row.status === 'cancelled' ? 'failed' : row.status} at ${row.finished_at.toISOString()}`
        : `${row?.status ?? 'missing'}`;
    if (settles.size === 1 && only !== rowSettle)
      violations.push(`step ${shortId(stepId)}: browsers were told "${only}" but the row says "${rowSettle}"`);
  }

  // Copies of one result for one claim must be answered alike: "the same result again" is 200.
  const copies = new Map<string, { ok: number; refused: number }>();
  for (const report of log.reports) {
    if (report.copy === 'stale' || report.late) continue;
    const key = `${report.stepId}@${report.namedClaim}`;
    const tally = copies.get(key) ?? { ok: 0, refused: 0 };
    if (report.http === 200) tally.ok += 1;
    if (report.http === 409) tally.refused += 1;
    copies.set(key, tally);
  }
  const mixed = [...copies].filter(([, t]) => t.ok > 0 && t.refused > 0).map(([key]) => key.split('@')[0]!);
  if (mixed.length)
    notes.push(
      `${mixed.length} result(s) posted several times got 200 for one copy and 409 for another: steps ${mixed.slice(0, 5).map(shortId).join(', ')}`,
    );
  const staleAccepted = log.reports.filter((r) => r.copy === 'stale' && r.http === 200).length;
  if (staleAccepted) notes.push(`${staleAccepted} stale result(s) naming an earlier claim were accepted`);

  const settledRows = rows.filter((r) => terminalStatuses.has(r.status));
  const byBackend = settledRows.filter(
    (r) => r.error_code && backendErrorCodes.has(r.error_code as StepErrorCode),
  ).length;
  const unanswered = settledRows.filter(
    (r) =>
      !accepted.has(r.id) &&
      !(r.error_code && backendErrorCodes.has(r.error_code as StepErrorCode)) &&
      r.status !== 'rejected',
  );
  if (unanswered.length) {
    const refusedOwn = unanswered.filter((r) =>
      log.reports.some((p) => p.stepId === r.id && p.copy !== 'stale' && p.http === 409),
    );
    notes.push(
      `${unanswered.length} step(s) settled by a browser result that no browser got a 200 for` +
        (refusedOwn.length
          ? `; ${refusedOwn.length} of them answered 409 to the very result that settled them: ` +
            refusedOwn
              .slice(0, 5)
              .map(
                (r) => `${shortId(r.id)} ("${log.reports.find((p) => p.stepId === r.id && p.http === 409)?.detail}")`,
              )
              .join(', ')
          : ''),
    );
  }
  return result(
    'exactly one settle per step',
    `${accepted.size} steps settled by a browser result (${log.reports.filter((r) => r.http === 200).length} answers of 200 across copies), ` +
      `${byBackend} settled by the backend, ${violations.length} settled twice or differently`,
    violations,
    notes,
  );
}

export interface ClaimInterval {
  stepId: string;
  accountId: string;
  start: number;
  end: number;
  source: string;
}

/** Server-side claim intervals: what the browsers were handed, widened by what the poller saw, plus claims no browser ever got. */
export function claimIntervals(log: SimLog, observed: ObservedClaim[]): ClaimInterval[] {
  const intervals = new Map<string, ClaimInterval>();
  for (const claim of log.claims) {
    intervals.set(claimKey(claim.stepId, claim.claimedAt), {
      stepId: claim.stepId,
      accountId: claim.accountId,
      start: claim.claimedAt,
      end: claim.heldUntil,
      source: claim.browser,
    });
  }
  for (const seen of observed) {
    const key = claimKey(seen.stepId, seen.claimedAt);
    const known = intervals.get(key);
    if (known) known.end = Math.max(known.end, seen.lastSeen);
    else
      intervals.set(key, {
        stepId: seen.stepId,
        accountId: seen.accountId,
        start: seen.claimedAt,
        end: seen.lastSeen,
        source: 'no browser (answer lost)',
      });
  }
  return [...intervals.values()];
}

/**
 * No account ran two steps at once: the server never held two claims of one account at the same
 * time (beyond `toleranceMs`, two transactions' clocks), and no two browsers of one account were
 * acting at the same time.
 */
export function checkNoOverlap(
  log: SimLog,
  observed: ObservedClaim[],
  doubleClaims: string[],
  toleranceMs = 500,
): CheckResult {
  const violations = [...doubleClaims];
  const intervals = claimIntervals(log, observed);
  const byAccount = new Map<string, ClaimInterval[]>();
  for (const i of intervals) byAccount.set(i.accountId, [...(byAccount.get(i.accountId) ?? []), i]);
  let closest = Infinity;
  for (const list of byAccount.values()) {
    list.sort((a, b) => a.start - b.start);
    let previous: ClaimInterval | null = null;
    for (const current of list) {
      if (previous) {
        closest = Math.min(closest, current.start - previous.end);
        if (current.start < previous.end - toleranceMs) {
          violations.push(
            `account ${shortId(current.accountId)}: step ${shortId(current.stepId)} was claimed ${seconds(previous.end - current.start)} ` +
              `before the claim of step ${shortId(previous.stepId)} (${previous.source}) ended`,
          );
        }
      }
      if (!previous || current.end > previous.end) previous = current;
    }
  }

  // The browsers' own clocks: from the claim answer to the moment the browser stopped acting.
  const runs = log.claims.filter((c): c is ClaimRecord & { ranUntil: number } => c.ranUntil !== null);
  const runsByAccount = new Map<string, typeof runs>();
  for (const run of runs) runsByAccount.set(run.accountId, [...(runsByAccount.get(run.accountId) ?? []), run]);
  for (const list of runsByAccount.values()) {
    list.sort((a, b) => a.answeredAt - b.answeredAt);
    for (let i = 1; i < list.length; i += 1) {
      const before = list[i - 1]!;
      const after = list[i]!;
      if (after.answeredAt < before.ranUntil) {
        violations.push(
          `account ${shortId(after.accountId)}: ${after.browser} ran step ${shortId(after.stepId)} while ${before.browser} was still running step ${shortId(before.stepId)}`,
        );
      }
    }
  }
  return result(
    'no account ran two steps at once',
    `${intervals.length} claims over ${byAccount.size} accounts, ${runs.length} runs; ` +
      `closest hand-out after the previous claim ended: ${Number.isFinite(closest) ? seconds(closest) : 'n/a'}`,
    violations,
  );
}

/**
 * Every claim that lapsed was handed out again within its lease plus `slackSeconds`, measured
 * from the last check-in that renewed it: the account's line moves on by then. The step itself
 * is handed out again if it is first in line; a lapsed metered step waits behind the account's
 * unmetered ones, so another step of the account handed out in time counts too, as does a step
 * that settled instead (failed with claim_expired, or a late result).
 */
export function checkExpiredClaims(
  log: SimLog,
  observed: ObservedClaim[],
  rows: StepRowLite[],
  options: {
    leaseSeconds: number;
    slackSeconds: number;
    endedAt: number;
    apiDown?: readonly { from: number; to: number }[];
  },
): CheckResult {
  // How much of a late claim's wait the API was down for: nothing could be handed out then.
  const apiDownWithin = (from: number, to: number) =>
    (options.apiDown ?? []).reduce((ms, d) => ms + Math.max(0, Math.min(to, d.to) - Math.max(from, d.from)), 0);
  const violations: string[] = [];
  const byId = new Map(rows.map((r) => [r.id, r]));
  const simClaims = new Set(log.claims.map((c) => claimKey(c.stepId, c.claimedAt)));
  const claimsOfAccount = new Map<string, ClaimInterval[]>();
  for (const i of claimIntervals(log, observed))
    claimsOfAccount.set(i.accountId, [...(claimsOfAccount.get(i.accountId) ?? []), i]);

  const lapsed: { stepId: string; accountId: string; claimedAt: number; renewedAt: number; why: string }[] = [
    ...log.claims
      .filter((c) => c.fate === 'silent' || c.fate === 'late' || c.fate === 'lost' || c.fate === 'refused')
      .map((c) => ({
        stepId: c.stepId,
        accountId: c.accountId,
        claimedAt: c.claimedAt,
        renewedAt: Math.max(c.claimedAt, c.lastRenewalSentAt),
        why: c.fate,
      })),
    // Claims whose answer no browser got: nobody ever renewed them.
    ...observed
      .filter((o) => !simClaims.has(claimKey(o.stepId, o.claimedAt)))
      .map((o) => ({
        stepId: o.stepId,
        accountId: o.accountId,
        claimedAt: o.claimedAt,
        renewedAt: o.claimedAt,
        why: 'answer lost',
      })),
  ];
  const tally = { same: 0, other: 0, settled: 0, pending: 0 };
  let slowest = -Infinity;
  for (const claim of lapsed) {
    const lapseAt = claim.renewedAt + options.leaseSeconds * 1000;
    const deadline = lapseAt + options.slackSeconds * 1000;
    const later = (claimsOfAccount.get(claim.accountId) ?? [])
      .filter((i) => i.start > claim.claimedAt)
      .sort((a, b) => a.start - b.start);
    const next = later[0];
    const row = byId.get(claim.stepId);
    const settledAt =
      row && terminalStatuses.has(row.status) && row.finished_at && row.finished_at.getTime() > claim.claimedAt
        ? row.finished_at.getTime()
        : Infinity;
    const event = Math.min(next?.start ?? Infinity, settledAt);
    if (!Number.isFinite(event)) {
      if (options.endedAt < deadline) tally.pending += 1;
      else
        violations.push(
          `step ${shortId(claim.stepId)} (${claim.why}): its account handed out nothing after the claim lapsed; the step is ${row?.status ?? 'missing'}`,
        );
      continue;
    }
    slowest = Math.max(slowest, event - lapseAt);
    const what =
      settledAt <= (next?.start ?? Infinity)
        ? 'settled'
        : next!.stepId === claim.stepId
          ? 'handed out again'
          : `followed by step ${shortId(next!.stepId)}`;
    if (event > deadline) {
      const down = apiDownWithin(lapseAt, event);
      violations.push(
        `step ${shortId(claim.stepId)} (${claim.why}) was ${what} ${seconds(event - lapseAt)} after its lease ran out (allowed ${options.slackSeconds} s)` +
          (options.apiDown ? `; the API was down ${seconds(down)} of that` : ''),
      );
    } else if (what === 'settled') tally.settled += 1;
    else if (what === 'handed out again') tally.same += 1;
    else tally.other += 1;
  }
  return result(
    `every expired claim handed out again within its lease + ${options.slackSeconds} s`,
    `${lapsed.length} claims lapsed or were cut off: in time ${tally.same} handed out again, ${tally.other} behind another step of the account, ` +
      `${tally.settled} settled instead; ${tally.pending} still inside their deadline at the end; ` +
      `slowest ${Number.isFinite(slowest) ? `${seconds(slowest)} after the lease ran out` : 'n/a'}`,
    violations,
  );
}

interface LedgerRow {
  workspace_id: string;
  available: number;
  held: number;
  spent: number;
  granted: number;
  held_moved: number;
  charged: number;
  released: number;
  open_holds: number;
}

/**
 * The credit ledger balances to the unit, per workspace: granted = available + held + spent, the
 * balance row agrees with the sum of ledger movements, held equals the open holds; no step has
 * more than one charge, and a step that failed, was skipped or cancelled holds or spends nothing.
 * Holds of steps are found by their cause key (`pnet-step:<step id>...`); with no priced steps
 * those parts hold trivially.
 */
export async function checkLedger(db: Db, rows: StepRowLite[]): Promise<CheckResult> {
  const violations: string[] = [];
  const ledger = await db<LedgerRow[]>`
    select w.id as workspace_id,
      coalesce(b.available, 0)::bigint as available, coalesce(b.held, 0)::bigint as held, coalesce(b.spent, 0)::bigint as spent,
      coalesce((select sum(amount) from credit_ledger l where l.workspace_id = w.id and kind = 'grant'), 0)::bigint as granted,
      coalesce((select sum(amount) from credit_ledger l where l.workspace_id = w.id and kind = 'hold'), 0)::bigint as held_moved,
      coalesce((select sum(amount) from credit_ledger l where l.workspace_id = w.id and kind = 'charge'), 0)::bigint as charged,
      coalesce((select sum(amount) from credit_ledger l where l.workspace_id = w.id and kind = 'release'), 0)::bigint as released,
      coalesce((select sum(amount) from credit_holds h where h.workspace_id = w.id and status = 'held'), 0)::bigint as open_holds
    from workspaces w left join credit_balances b on b.workspace_id = w.id`;
  for (const w of ledger) {
    const id = shortId(w.workspace_id);
    if (w.granted !== w.available + w.held + w.spent) {
      violations.push(
        `workspace ${id}: granted ${w.granted} ≠ available ${w.available} + held ${w.held} + spent ${w.spent}`,
      );
    }
    if (w.held !== w.open_holds) violations.push(`workspace ${id}: held ${w.held} ≠ open holds ${w.open_holds}`);
    if (w.available !== w.granted - w.held_moved + w.released)
      violations.push(
        `workspace ${id}: available ${w.available} disagrees with the ledger (${w.granted} − ${w.held_moved} + ${w.released})`,
      );
    if (w.held !== w.held_moved - w.charged - w.released)
      violations.push(
        `workspace ${id}: held ${w.held} disagrees with the ledger (${w.held_moved} − ${w.charged} − ${w.released})`,
      );
    if (w.spent !== w.charged) violations.push(`workspace ${id}: spent ${w.spent} ≠ charges ${w.charged}`);
  }

  const perStep = await db<{ step_id: string; holds: number; open: number; charges: number; charged: number }[]>`
    select substring(h.cause_key from 'pnet-step:([0-9a-fA-F-]{36})') as step_id,
      count(*)::int as holds,
      count(*) filter (where h.status = 'held')::int as open,
      coalesce(sum((select count(*) from credit_ledger l where l.hold_id = h.id and l.kind = 'charge')), 0)::int as charges,
      coalesce(sum((select sum(amount) from credit_ledger l where l.hold_id = h.id and l.kind = 'charge')), 0)::bigint as charged
    from credit_holds h
    where h.cause_key like 'pnet-step:%'
    group by 1`;
  const byId = new Map(rows.map((r) => [r.id, r]));
  for (const step of perStep) {
    const row = byId.get(step.step_id);
    if (step.charges > 1) violations.push(`step ${shortId(step.step_id)} was charged ${step.charges} times`);
    if (!row) continue;
    if (terminalStatuses.has(row.status) && step.open > 0)
      violations.push(`step ${shortId(step.step_id)} is ${row.status} and still holds credits`);
    if (row.status !== 'succeeded' && step.charges > 0)
      violations.push(`step ${shortId(step.step_id)} is ${row.status} and was charged`);
  }
  const totals = ledger.reduce(
    (t, w) => ({
      granted: t.granted + w.granted,
      available: t.available + w.available,
      held: t.held + w.held,
      spent: t.spent + w.spent,
    }),
    { granted: 0, available: 0, held: 0, spent: 0 },
  );
  const charges = perStep.reduce((n, s) => n + s.charges, 0);
  return result(
    'the credit ledger balances',
    `granted ${totals.granted} = available ${totals.available} + held ${totals.held} + spent ${totals.spent}; ` +
      `${perStep.length} priced steps held credits, ${charges} charged (${perStep.filter((s) => s.open > 0).length} holds open)`,
    violations,
  );
}

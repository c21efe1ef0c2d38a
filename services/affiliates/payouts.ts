/**
 * Affiliate payouts' use cases (decision 044), shared by the routes, the cycle's activities and the
 * admin command line:
 *
 * - the gate snapshot of one affiliate and its decision (decidePayoutGate: the same function for the
 *   performance read, the settings read and the cycle);
 * - the cycle's steps, each idempotent: follow open payouts (read their batches back and apply each
 *   item's status), forfeit balances whose return stayed unclaimed past the period, make the
 *   period's payouts a page of affiliates at a time (payout row and `payout` ledger row in one
 *   transaction; UNIQUE (affiliate, period) makes a second run a no-op), and send them in batches
 *   under a stable sender batch id.
 */
import type { Db, Sql } from '../../db/sql.js';
import { decidePayoutGate, payoutPeriodOf, type PayoutGateDecision } from '../../domain/affiliates/payout-gates.js';
import {
  decidePayoutTransition,
  forfeitsAt,
  payoutBatchSize,
  senderBatchIdOf,
  type PayoutEvent,
  type PayoutSettingsSchema,
  type PayoutSettingsUpdateSchema,
} from '../../domain/affiliates/payouts.js';
import { notFound } from '../../domain/shared/errors.js';
import type { z } from 'zod';
import { PayoutValidationError, type PayoutProvider } from '../../integrations/payouts/provider.js';
import type { AffiliatePayoutTerms } from '../../integrations/payouts/settings.js';
import { affiliateOfWorkspace, lockAffiliate } from '../../store/affiliates/affiliates.js';
import { affiliateBalances, appendAffiliateLedgerEntry } from '../../store/affiliates/ledger.js';
import {
  assignNewBatch,
  batchesToFollow,
  batchPayouts,
  forfeitureCandidates,
  forfeitureCauseKey,
  gateSnapshot,
  gateSnapshotPage,
  heldMaturities,
  holdDestination,
  insertPayout,
  lockPayouts,
  markBatchRefused,
  markBatchSent,
  movePayout,
  notePayoutProvider,
  openBatch,
  payoutProgramPaused,
  payoutSettings,
  payoutsPage,
  setOperatorGate,
  setPayoutEmail,
  setPayoutProgramPaused,
  type GateSnapshotRow,
  type OperatorGate,
  type PayoutRow,
} from '../../store/affiliates/payouts.js';

/** The gate decision for one affiliate at `now` (cycleAt: as the cycle asks it). Undefined for an unknown affiliate. */
export async function payoutGateOf(
  db: Db,
  affiliateId: string,
  now: Date,
  terms: AffiliatePayoutTerms,
  cycleAt?: Date,
): Promise<PayoutGateDecision | undefined> {
  const snapshot = await gateSnapshot(db, affiliateId);
  if (!snapshot) return undefined;
  const [paused, balances, maturities] = await Promise.all([
    payoutProgramPaused(db),
    affiliateBalances(db, affiliateId, now),
    heldMaturities(db, affiliateId),
  ]);
  return decideFromSnapshot(snapshot, {
    paused,
    availableCents: balances.availableCents,
    maturities,
    now,
    terms,
    cycleAt,
  });
}

function decideFromSnapshot(
  s: GateSnapshotRow,
  x: {
    paused: boolean;
    availableCents: number;
    maturities: { availableAt: Date; amountCents: number }[];
    now: Date;
    terms: AffiliatePayoutTerms;
    cycleAt?: Date;
  },
): PayoutGateDecision {
  return decidePayoutGate({
    now: x.now,
    ...(x.cycleAt ? { cycleAt: x.cycleAt } : {}),
    schedule: { dayOfMonth: x.terms.dayOfMonth, minimumCents: x.terms.minimumCents },
    programPaused: x.paused,
    unavailable: s.unavailable ?? false,
    underReview: s.under_review ?? false,
    blocked: s.blocked ?? false,
    identityVerified: s.identity_verified ?? false,
    payoutEmail: s.payout_email,
    destinationHold: s.destination_hold ?? false,
    availableCents: x.availableCents,
    maturities: x.maturities,
    paidPeriods: s.periods,
    timeZone: s.time_zone,
  });
}

// ---- Applying the provider's word ----

export interface PayoutEventInput {
  payoutId: string;
  event: PayoutEvent;
  providerItemId: string | null;
}

/**
 * Payouts' events in one transaction (a batch's items): each payout locked (in id order), its
 * status moved by compare-and-set, its money back and its destination held with it. Answers each
 * payout's new status, or null where nothing moved.
 */
export async function applyPayoutEvents(
  sql: Sql,
  events: PayoutEventInput[],
  now: Date,
): Promise<Map<string, PayoutRow['status'] | null>> {
  const result = new Map<string, PayoutRow['status'] | null>();
  if (events.length === 0) return result;
  const byId = new Map(events.map((e) => [e.payoutId, e]));
  await sql.begin(async (tx) => {
    const payouts = await lockPayouts(tx, [...byId.keys()]);
    const plans = payouts.map((payout) => {
      const input = byId.get(payout.id)!;
      return { payout, input, move: decidePayoutTransition(payout.status, input.event) };
    });
    // Money goes back under the affiliate's lock (as maturation and clawbacks take it), in id order.
    const affiliates = [...new Set(plans.filter((p) => p.move?.moneyBack).map((p) => p.payout.affiliate_id))].sort();
    await Promise.all(affiliates.map((id) => lockAffiliate(tx, id)));
    await Promise.all(
      plans.map(async ({ payout, input, move }) => {
        const providerStatus = input.event.kind === 'item' ? input.event.providerStatus : null;
        if (!move) {
          if (providerStatus)
            await notePayoutProvider(tx, { id: payout.id, providerStatus, providerItemId: input.providerItemId });
          result.set(payout.id, null);
          return;
        }
        const reason = input.event.kind === 'refused' ? input.event.reason : null;
        const moved = await movePayout(tx, {
          id: payout.id,
          from: payout.status,
          to: move.to,
          providerStatus,
          providerItemId: input.providerItemId,
          reason,
          now,
        });
        result.set(payout.id, moved ? move.to : null);
        if (!moved) return;
        if (move.moneyBack) {
          await appendAffiliateLedgerEntry(tx, {
            affiliateId: payout.affiliate_id,
            kind: 'adjustment',
            amountCents: payout.amount_cents,
            description:
              move.moneyBack === 'returned'
                ? `Payout for ${payout.period} returned unclaimed; back on the balance`
                : `Payout for ${payout.period} failed${reason ? ` (${reason})` : providerStatus ? ` (${providerStatus})` : ''}; back on the balance`,
            causeKey: `payout-${move.moneyBack}:${payout.id}`,
            occurredAt: now,
          });
        }
        if (move.holdDestination) await holdDestination(tx, payout.affiliate_id, move.holdDestination, now);
      }),
    );
  });
  return result;
}

/** One payout's event (see applyPayoutEvents). */
export async function applyPayoutEvent(
  sql: Sql,
  payoutId: string,
  event: PayoutEvent,
  detail: { providerItemId: string | null; now: Date },
): Promise<PayoutRow['status'] | null> {
  return (
    (await applyPayoutEvents(sql, [{ payoutId, event, providerItemId: detail.providerItemId }], detail.now)).get(
      payoutId,
    ) ?? null
  );
}

/** Reads every sent batch with an open payout back from the provider and applies each item. */
export async function followOpenPayouts(
  sql: Sql,
  provider: PayoutProvider,
  now: Date,
): Promise<{ batches: number; moved: number; stillOpen: number }> {
  let moved = 0;
  let stillOpen = 0;
  const batches = await batchesToFollow(sql);
  for (const batch of batches) {
    const read = await provider.getBatch(batch.provider_batch_id!);
    const bySender = new Map(read.items.map((i) => [i.senderItemId, i]));
    const payouts = await batchPayouts(sql, batch.id);
    const events: PayoutEventInput[] = [];
    for (const payout of payouts) {
      const item = bySender.get(payout.id);
      // Nothing new from the provider: nothing to write.
      if (
        !item ||
        (payout.provider_status === item.status &&
          !decidePayoutTransition(payout.status, { kind: 'item', providerStatus: item.status }))
      )
        continue;
      events.push({
        payoutId: payout.id,
        event: { kind: 'item', providerStatus: item.status },
        providerItemId: item.providerItemId,
      });
    }
    const applied = await applyPayoutEvents(sql, events, now);
    for (const payout of payouts) {
      const to = applied.get(payout.id) ?? null;
      if (to) moved += 1;
      const status = to ?? payout.status;
      if (status === 'held' || status === 'created') stillOpen += 1;
    }
  }
  return { batches: batches.length, moved, stillOpen };
}

// ---- Forfeiture ----

/** Forfeits the available balance of each affiliate whose return has stayed unclaimed (destination held) for the period. */
export async function forfeitUnclaimedBalances(sql: Sql, now: Date, forfeitAfterDays: number): Promise<number> {
  // A hold that started at `since` forfeits at forfeitsAt(since): every hold started on or before this instant is due.
  const before = new Date(now.getTime() - forfeitsAt(new Date(0), forfeitAfterDays).getTime());
  let forfeited = 0;
  for (const c of await forfeitureCandidates(sql, before, 500)) {
    const wrote = await sql.begin(async (tx) => {
      await lockAffiliate(tx, c.affiliate_id);
      const { availableCents } = await affiliateBalances(tx, c.affiliate_id, now);
      return appendAffiliateLedgerEntry(tx, {
        affiliateId: c.affiliate_id,
        kind: 'forfeiture',
        // A balance at or below zero forfeits nothing; the zero row still marks this hold as settled.
        amountCents: -Math.max(0, availableCents),
        description:
          availableCents > 0
            ? `Unclaimed for ${forfeitAfterDays} days after a returned payout; the available balance is forfeited`
            : `Unclaimed for ${forfeitAfterDays} days after a returned payout; nothing was available to forfeit`,
        causeKey: forfeitureCauseKey(c.affiliate_id, c.destination_hold_since),
        occurredAt: now,
      });
    });
    if (wrote) forfeited += 1;
  }
  return forfeited;
}

// ---- Making the period's payouts ----

export interface PreparePage {
  next: string | null;
  created: number;
  skipped: number;
}

/** One page of affiliates: each one the gate lets through gets the period's payout, its ledger row in the same transaction. */
export async function preparePayoutsPage(
  sql: Sql,
  input: { cycleAt: Date; after: string | null; limit: number; terms: AffiliatePayoutTerms },
): Promise<PreparePage> {
  const page = await gateSnapshotPage(sql, input.after, input.limit);
  const paused = await payoutProgramPaused(sql);
  const decide = (snapshot: GateSnapshotRow, availableCents: number) =>
    decideFromSnapshot(snapshot, {
      paused,
      availableCents,
      maturities: [],
      now: input.cycleAt,
      terms: input.terms,
      cycleAt: input.cycleAt,
    });
  // A first look without a lock: most affiliates of a repeated run are not payable (paid this period, gated, under the minimum).
  const looks = await Promise.all(
    page.map(async (snapshot) => ({
      snapshot,
      available: (await affiliateBalances(sql, snapshot.affiliate_id, input.cycleAt)).availableCents,
    })),
  );
  const candidates = looks.filter((l) => decide(l.snapshot, l.available).payable).map((l) => l.snapshot);
  // The page's payouts in one transaction: each affiliate's row locked (in id order, as the page
  // is), so its balance cannot change under its payout (clawbacks, maturation and payouts take it
  // first); the gate read again under the lock; the payout and its ledger row together.
  const created = await sql.begin(async (tx) => {
    await Promise.all(candidates.map((c) => lockAffiliate(tx, c.affiliate_id)));
    const made = await Promise.all(
      candidates.map(async (snapshot) => {
        const [fresh, balances] = await Promise.all([
          gateSnapshot(tx, snapshot.affiliate_id),
          affiliateBalances(tx, snapshot.affiliate_id, input.cycleAt),
        ]);
        const availableCents = balances.availableCents;
        const gate = decide(fresh ?? snapshot, availableCents);
        if (!fresh || !gate.payable) return false;
        const payout = await insertPayout(tx, {
          affiliateId: snapshot.affiliate_id,
          workspaceId: snapshot.workspace_id,
          period: gate.period,
          amountCents: availableCents,
          receiverEmail: fresh.payout_email!,
          now: input.cycleAt,
        });
        if (!payout) return false;
        await appendAffiliateLedgerEntry(tx, {
          affiliateId: snapshot.affiliate_id,
          kind: 'payout',
          amountCents: -availableCents,
          description: `Payout for ${gate.period} to ${fresh.payout_email}`,
          causeKey: `payout:${payout.id}`,
          occurredAt: input.cycleAt,
        });
        return true;
      }),
    );
    return made.filter(Boolean).length;
  });
  const skipped = page.length - created;
  return { next: page.length < input.limit ? null : page[page.length - 1]!.affiliate_id, created, skipped };
}

// ---- Sending ----

export interface SendResult {
  /** No batch was left to send. */
  done: boolean;
  batchId: string | null;
  sent: number;
  failed: number;
  requeued: number;
}

/**
 * Sends the next batch: an open one left by a crash first (under its sender batch id, so the
 * provider answers the batch it already made), else a new one of the held payouts waiting, of this
 * period or one an earlier cycle could not send. A 422 fails the items it names (money back) and
 * puts the others back for the next batch.
 */
export async function sendNextPayoutBatch(
  sql: Sql,
  provider: PayoutProvider,
  input: { period: string; now: Date; batchSize?: number },
): Promise<SendResult> {
  const batch =
    (await openBatch(sql)) ??
    (await sql.begin((tx) =>
      assignNewBatch(tx, {
        period: input.period,
        limit: input.batchSize ?? payoutBatchSize,
        senderBatchId: (id) => senderBatchIdOf(input.period, id),
      }),
    ));
  if (!batch) return { done: true, batchId: null, sent: 0, failed: 0, requeued: 0 };
  const payouts = (await batchPayouts(sql, batch.id)).filter((p) => p.status === 'held');
  if (payouts.length === 0) {
    await sql.begin((tx) => markBatchRefused(tx, batch.id));
    return { done: false, batchId: batch.id, sent: 0, failed: 0, requeued: 0 };
  }
  try {
    const result = await provider.createBatch({
      senderBatchId: batch.sender_batch_id,
      emailSubject: 'Your affiliate payout',
      items: payouts.map((p) => ({
        senderItemId: p.id,
        receiverEmail: p.receiver_email,
        amountCents: p.amount_cents,
        currency: 'USD' as const,
        note: `Affiliate commissions for ${p.period}`,
      })),
    });
    await sql.begin((tx) =>
      markBatchSent(tx, { batchId: batch.id, providerBatchId: result.providerBatchId, now: input.now }),
    );
    const bySender = new Map(result.items.map((i) => [i.senderItemId, i]));
    // Accepted: at least `created`; an item's own status may already say more.
    await applyPayoutEvents(
      sql,
      payouts.map((p) => {
        const item = bySender.get(p.id);
        return {
          payoutId: p.id,
          event: { kind: 'item' as const, providerStatus: item?.status ?? 'PENDING' },
          providerItemId: item?.providerItemId ?? null,
        };
      }),
      input.now,
    );
    return { done: false, batchId: batch.id, sent: payouts.length, failed: 0, requeued: 0 };
  } catch (error) {
    if (!(error instanceof PayoutValidationError)) throw error;
    // The named items fail with the provider's reason; a refusal naming no item fails them all, with its words.
    const refused: PayoutEventInput[] =
      error.itemIssues.size === 0
        ? payouts.map((p) => ({
            payoutId: p.id,
            event: { kind: 'refused' as const, reason: error.message },
            providerItemId: null,
          }))
        : [...error.itemIssues].flatMap(([index, reason]) =>
            payouts[index]
              ? [
                  {
                    payoutId: payouts[index].id,
                    event: { kind: 'refused' as const, reason: `The provider refused it: ${reason}` },
                    providerItemId: null,
                  },
                ]
              : [],
          );
    const applied = await applyPayoutEvents(sql, refused, input.now);
    const failed = [...applied.values()].filter((to) => to === 'failed').length;
    await sql.begin((tx) => markBatchRefused(tx, batch.id));
    return { done: false, batchId: batch.id, sent: 0, failed, requeued: payouts.length - failed };
  }
}

export { payoutPeriodOf };

type PayoutSettings = z.infer<typeof PayoutSettingsSchema>;
type PayoutSettingsUpdate = z.infer<typeof PayoutSettingsUpdateSchema>;

// ---- What the routes answer ----

function payoutOf(row: PayoutRow): PayoutView {
  return {
    id: row.id,
    period: row.period,
    amount_cents: row.amount_cents,
    status: row.status,
    paid_at: row.paid_at?.toISOString() ?? null,
    created_at: row.created_at.toISOString(),
  };
}

export interface PayoutView {
  id: string;
  period: string;
  amount_cents: number;
  status: PayoutRow['status'];
  paid_at: string | null;
  created_at: string;
}

async function enrolled(db: Db, workspaceId: string) {
  const affiliate = await affiliateOfWorkspace(db, workspaceId);
  if (!affiliate) throw notFound('Affiliate enrolment (enrol the workspace first)');
  return affiliate;
}

/** The workspace's payouts, newest first. */
export async function listPayouts(
  sql: Sql,
  workspaceId: string,
  page: { limit: number; offset: number },
): Promise<{ payouts: PayoutView[]; next_offset: number | null }> {
  const affiliate = await enrolled(sql, workspaceId);
  const rows = await payoutsPage(sql, affiliate.id, { limit: page.limit + 1, offset: page.offset });
  return {
    payouts: rows.slice(0, page.limit).map(payoutOf),
    next_offset: rows.length > page.limit ? page.offset + page.limit : null,
  };
}

/** The payout settings with the gate's answer (the same decidePayoutGate the cycle applies). */
export async function readPayoutSettings(
  sql: Sql,
  workspaceId: string,
  terms: AffiliatePayoutTerms,
  now: Date = new Date(),
): Promise<PayoutSettings> {
  const affiliate = await enrolled(sql, workspaceId);
  const [settings, paused, gate] = await Promise.all([
    payoutSettings(sql, affiliate.id),
    payoutProgramPaused(sql),
    payoutGateOf(sql, affiliate.id, now, terms),
  ]);
  return {
    payout_email: settings?.payout_email ?? null,
    identity_verified: settings?.identity_verified ?? false,
    destination_hold: settings?.destination_hold ?? false,
    destination_hold_reason: settings?.destination_hold_reason ?? null,
    under_review: settings?.under_review ?? false,
    blocked: settings?.blocked ?? false,
    unavailable: settings?.unavailable ?? false,
    program_paused: paused,
    minimum_cents: terms.minimumCents,
    payout_day_of_month: terms.dayOfMonth,
    forfeit_after_days: terms.forfeitAfterDays,
    next_payout_status: gate!.next_payout_status,
    next_payout_blocker: gate!.next_payout_blocker,
    next_payout_cents: gate!.next_payout_cents,
    next_payout_on: gate!.next_payout_on,
  };
}

export async function updatePayoutSettings(
  sql: Sql,
  workspaceId: string,
  body: PayoutSettingsUpdate,
  terms: AffiliatePayoutTerms,
): Promise<PayoutSettings> {
  const affiliate = await enrolled(sql, workspaceId);
  await setPayoutEmail(sql, {
    affiliateId: affiliate.id,
    workspaceId,
    email: body.payout_email?.trim().toLowerCase() ?? null,
  });
  return readPayoutSettings(sql, workspaceId, terms);
}

// ---- What operators set (the admin command line) ----

/** Turns one of a workspace's affiliate payout gates on or off; not found when it is not enrolled. */
export async function setAffiliatePayoutGate(
  sql: Sql,
  input: { workspaceId: string; gate: OperatorGate; on: boolean; note: string | null; now?: Date },
) {
  const affiliate = await enrolled(sql, input.workspaceId);
  const row = await setOperatorGate(sql, {
    affiliateId: affiliate.id,
    workspaceId: input.workspaceId,
    gate: input.gate,
    on: input.on,
    note: input.note,
    now: input.now ?? new Date(),
  });
  return { affiliate_id: affiliate.id, gate: input.gate, on: input.on, settings: row };
}

/** The program-wide pause: while paused every cycle pays nobody (next_payout_status `paused`). */
export async function setAffiliatePayoutsPaused(sql: Sql, paused: boolean, note: string | null) {
  await setPayoutProgramPaused(sql, paused, note);
  return { affiliate_payouts_paused: paused };
}

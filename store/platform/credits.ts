/**
 * The credit ledger: every movement is one row with a unique cause key, written in the same
 * transaction as the balance change, so a retry can never move credits twice ("never charged
 * twice" is the unique constraint). Other features spend through holdCredits / chargeHold /
 * releaseHold inside their own transactions. Only a hold and a revoke lower the available
 * balance, so those two record `credits.low` when they cross its threshold, in the same statement
 * or transaction.
 */
import type { Db, Sql } from '../../db/sql.js';
import { creditsLowThreshold, crossesCreditsLow } from '../../domain/notifications/events.js';
import {
  defaultHoldTtlSeconds,
  type CreditBalance,
  type CreditMovement,
  type CreditMovementKind,
} from '../../domain/platform/credits.js';
import { ApiError } from '../../domain/shared/errors.js';
import { recordWorkspaceEvent } from '../notifications/outbox.js';

export interface CreditHold {
  id: string;
  workspace_id: string;
  amount: number;
  charged: number;
  status: 'held' | 'charged' | 'released';
  cause_key: string;
  expires_at: Date;
}

export async function recordMovement(
  tx: Db,
  m: {
    workspaceId: string;
    kind: CreditMovementKind;
    amount: number;
    causeKey: string;
    holdId?: string;
    note?: string;
  },
): Promise<boolean> {
  const rows = await tx`
    insert into credit_ledger (workspace_id, hold_id, kind, amount, cause_key, note)
    values (${m.workspaceId}, ${m.holdId ?? null}, ${m.kind}, ${m.amount}, ${m.causeKey}, ${m.note ?? null})
    on conflict (workspace_id, cause_key) do nothing returning id`;
  return rows.length === 1;
}

export async function getBalance(db: Db, workspaceId: string): Promise<CreditBalance> {
  const [row] = await db<CreditBalance[]>`
    select available, held, spent from credit_balances where workspace_id = ${workspaceId}`;
  return row ?? { available: 0, held: 0, spent: 0 };
}

/** Adds credits once per cause key, inside the caller's transaction; true when this call added them. */
export async function grantCreditsIn(
  tx: Db,
  input: { workspaceId: string; amount: number; causeKey: string; note?: string },
): Promise<boolean> {
  if (!Number.isInteger(input.amount) || input.amount <= 0)
    throw new ApiError('unprocessable', 'A grant is a positive whole number of credits.');
  if (!(await recordMovement(tx, { ...input, kind: 'grant' }))) return false;
  await tx`
    insert into credit_balances (workspace_id, available) values (${input.workspaceId}, ${input.amount})
    on conflict (workspace_id) do update
      set available = credit_balances.available + excluded.available, updated_at = now()`;
  return true;
}

/** Adds credits once per cause key; a repeated cause is a no-op that returns the balance. */
export async function grantCredits(
  sql: Sql,
  input: { workspaceId: string; amount: number; causeKey: string; note?: string },
): Promise<CreditBalance> {
  return sql.begin<CreditBalance>(async (tx) => {
    await grantCreditsIn(tx, input);
    return getBalance(tx, input.workspaceId);
  });
}

/**
 * Takes credits back (a refunded or disputed purchase) once per cause key, in the caller's
 * transaction: at most what is available, since what was spent stays spent. Answers how many
 * were taken (0 for a repeated cause or an empty balance).
 */
export async function revokeCreditsIn(
  tx: Db,
  input: { workspaceId: string; amount: number; causeKey: string; note: string },
): Promise<number> {
  const [balance] = await tx<{ available: number }[]>`
    select available from credit_balances where workspace_id = ${input.workspaceId} for update`;
  const take = Math.min(input.amount, Number(balance?.available ?? 0));
  if (take <= 0) return 0;
  const note = take < input.amount ? `${input.note} (${input.amount - take} already spent)` : input.note;
  if (
    !(await recordMovement(tx, {
      workspaceId: input.workspaceId,
      kind: 'revoke',
      amount: take,
      causeKey: input.causeKey,
      note,
    }))
  )
    return 0;
  await tx`update credit_balances set available = available - ${take}, updated_at = now() where workspace_id = ${input.workspaceId}`;
  const before = Number(balance!.available);
  if (crossesCreditsLow(before, before - take))
    await recordWorkspaceEvent(tx, {
      workspaceId: input.workspaceId,
      type: 'credits.low',
      payload: { balance: before - take, threshold: creditsLowThreshold },
    });
  return take;
}

/** What a hold sets aside; `id` names the hold ahead (a statement that links to it in the same breath). */
export interface HoldInput {
  workspaceId: string;
  amount: number;
  causeKey: string;
  ttlSeconds?: number;
  id?: string;
}

/**
 * The common table expressions of a hold, to start a `with`: `taken` (the balance, only while
 * it covers the amount and the cause holds nothing yet), `created` (the hold), `movement` (its
 * ledger row) and `credits_low` (the outbox's `credits.low` when the hold takes the available
 * balance below the threshold; its payload is the catalogue's, two integers). A statement that
 * writes more beside the hold (queueing a step) composes them, so the workspace's balance row is
 * locked by one auto-committed statement, never across a round trip.
 */
export function holdCtes(db: Db, input: HoldInput) {
  return db`
    taken as (
      update credit_balances set available = available - ${input.amount}, held = held + ${input.amount}, updated_at = now()
      where workspace_id = ${input.workspaceId} and available >= ${input.amount}
        and not exists (select 1 from credit_holds where workspace_id = ${input.workspaceId} and cause_key = ${input.causeKey})
      returning workspace_id, available
    ), credits_low as (
      insert into workspace_events (workspace_id, type, payload)
      select workspace_id, 'credits.low', jsonb_build_object('balance', available, 'threshold', ${creditsLowThreshold}::int)
      from taken
      where available < ${creditsLowThreshold} and available + ${input.amount} >= ${creditsLowThreshold}
    ), created as (
      insert into credit_holds (id, workspace_id, amount, cause_key, expires_at)
      select coalesce(${input.id ?? null}::uuid, gen_random_uuid()), workspace_id, ${input.amount}::bigint, ${input.causeKey}::text,
        now() + ${input.ttlSeconds ?? defaultHoldTtlSeconds}::int * interval '1 second'
      from taken
      returning *
    ), movement as (
      insert into credit_ledger (workspace_id, hold_id, kind, amount, cause_key)
      select workspace_id, id, 'hold', amount, 'hold:' || cause_key from created
      on conflict (workspace_id, cause_key) do nothing
    )`;
}

export function validHoldAmount(amount: number) {
  if (!Number.isInteger(amount) || amount <= 0)
    throw new ApiError('unprocessable', 'A hold is a positive whole number of credits.');
}

export async function insufficientCredits(db: Db, workspaceId: string, amount: number): Promise<ApiError> {
  const balance = await getBalance(db, workspaceId);
  return new ApiError(
    'insufficient_credits',
    `This needs ${amount} credits and the workspace has ${balance.available} available.`,
  );
}

/**
 * Sets credits aside for an operation. Idempotent by cause key (the same cause returns the same
 * hold). Refused, with nothing written, when the available balance would go below zero.
 */
export async function holdCredits(tx: Db, input: HoldInput): Promise<CreditHold> {
  validHoldAmount(input.amount);
  // The second half of the union reads the holds as they were before the statement: the same
  // cause held before.
  const [hold] = await tx<CreditHold[]>`
    with ${holdCtes(tx, input)}
    select * from created
    union all
    select * from credit_holds where workspace_id = ${input.workspaceId} and cause_key = ${input.causeKey}`;
  if (!hold) throw await insufficientCredits(tx, input.workspaceId, input.amount);
  return hold;
}

/**
 * The statement that ends a hold: `charged` spends `charge` (at most the hold) and returns the
 * rest; `released` returns it all. Compare-and-set on status: only a held hold settles, so a
 * second settle of any kind changes nothing and answers no row. One statement for the hold, the
 * balance and the ledger, unawaited so a caller can send it with its COMMIT (`transaction` in db/sql.ts):
 * every hold and settle of a workspace takes its balance row's lock until commit.
 */
export function settleHoldStatement(tx: Db, holdId: string, outcome: 'charged' | 'released', charge: number) {
  return tx<CreditHold[]>`
    with settled as (
      update credit_holds set status = ${outcome}, charged = least(${charge}, amount), settled_at = now()
      where id = ${holdId} and status = 'held' returning *
    ), balance as (
      update credit_balances b set held = b.held - s.amount, available = b.available + (s.amount - s.charged),
        spent = b.spent + s.charged, updated_at = now()
      from settled s where b.workspace_id = s.workspace_id
    ), movements as (
      insert into credit_ledger (workspace_id, hold_id, kind, amount, cause_key)
      select s.workspace_id, s.id, m.kind, m.amount, m.kind || ':' || s.id
      from settled s, lateral (values (1, 'charge', s.charged), (2, 'release', s.amount - s.charged)) as m (ord, kind, amount)
      where m.amount > 0
      order by m.ord
      on conflict (workspace_id, cause_key) do nothing
    )
    select * from settled`;
}

/** Ends a hold (see settleHoldStatement) and answers it as it stands. */
export async function settleHold(
  tx: Db,
  holdId: string,
  outcome: 'charged' | 'released',
  charge: number,
): Promise<CreditHold | undefined> {
  const [hold] = await settleHoldStatement(tx, holdId, outcome, charge);
  if (hold) return hold;
  const [current] = await tx<CreditHold[]>`select * from credit_holds where id = ${holdId}`;
  return current;
}

export const chargeHold = (tx: Db, holdId: string, amount?: number) =>
  settleHold(tx, holdId, 'charged', amount ?? Number.MAX_SAFE_INTEGER);
export const chargeHoldStatement = (tx: Db, holdId: string) =>
  settleHoldStatement(tx, holdId, 'charged', Number.MAX_SAFE_INTEGER);
export const releaseHoldStatement = (tx: Db, holdId: string) => settleHoldStatement(tx, holdId, 'released', 0);
export const releaseHold = (tx: Db, holdId: string) => settleHold(tx, holdId, 'released', 0);

export interface MovementRow extends Omit<CreditMovement, 'created_at'> {
  created_at: Date;
}

export async function listMovements(db: Db, workspaceId: string, limit: number, beforeId?: number) {
  const rows = await db<MovementRow[]>`
    select id, kind, amount, hold_id, cause_key, note, created_at from credit_ledger
    where workspace_id = ${workspaceId} ${beforeId ? db`and id < ${beforeId}` : db``}
    order by id desc limit ${limit + 1}`;
  const page = rows.slice(0, limit).map((r) => ({ ...r, created_at: r.created_at.toISOString() }));
  return { movements: page, next_before_id: rows.length > limit ? page[page.length - 1]!.id : null };
}

/**
 * The credit ledger: every movement is one row with a unique cause key, written in the same
 * transaction as the balance change, so a retry can never move credits twice ("never charged
 * twice" is the unique constraint). Other features spend through holdCredits / chargeHold /
 * releaseHold inside their own transactions.
 */
import type { Db, Sql } from '../db/sql.js';
import { defaultHoldTtlSeconds, type CreditBalance, type CreditMovement, type CreditMovementKind } from '../domain/credits.js';
import { ApiError } from '../domain/errors.js';

export interface CreditHold {
  id: string;
  workspace_id: string;
  amount: number;
  charged: number;
  status: 'held' | 'charged' | 'released';
  cause_key: string;
  expires_at: Date;
}

async function recordMovement(
  tx: Db,
  m: { workspaceId: string; kind: CreditMovementKind; amount: number; causeKey: string; holdId?: string; note?: string },
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

/** Adds credits once per cause key; a repeated cause is a no-op that returns the balance. */
export async function grantCredits(
  sql: Sql,
  input: { workspaceId: string; amount: number; causeKey: string; note?: string },
): Promise<CreditBalance> {
  if (!Number.isInteger(input.amount) || input.amount <= 0) throw new ApiError('unprocessable', 'A grant is a positive whole number of credits.');
  return sql.begin(async (tx) => {
    if (await recordMovement(tx, { ...input, kind: 'grant' })) {
      await tx`
        insert into credit_balances (workspace_id, available) values (${input.workspaceId}, ${input.amount})
        on conflict (workspace_id) do update
          set available = credit_balances.available + excluded.available, updated_at = now()`;
    }
    return getBalance(tx, input.workspaceId);
  }) as Promise<CreditBalance>;
}

/**
 * Sets credits aside for an operation. Idempotent by cause key (the same cause returns the same
 * hold). Refused, with nothing written, when the available balance would go below zero.
 */
export async function holdCredits(
  tx: Db,
  input: { workspaceId: string; amount: number; causeKey: string; ttlSeconds?: number },
): Promise<CreditHold> {
  if (!Number.isInteger(input.amount) || input.amount <= 0) throw new ApiError('unprocessable', 'A hold is a positive whole number of credits.');
  // One statement, as a settle: the balance row stays locked from its update to commit, and a
  // hold queued beside a settle of the same workspace waits that long. The second half of the
  // union reads the holds as they were before the statement: the same cause held before.
  const [hold] = await tx<CreditHold[]>`
    with taken as (
      update credit_balances set available = available - ${input.amount}, held = held + ${input.amount}, updated_at = now()
      where workspace_id = ${input.workspaceId} and available >= ${input.amount}
        and not exists (select 1 from credit_holds where workspace_id = ${input.workspaceId} and cause_key = ${input.causeKey})
      returning workspace_id
    ), created as (
      insert into credit_holds (workspace_id, amount, cause_key, expires_at)
      select workspace_id, ${input.amount}::bigint, ${input.causeKey}::text, now() + ${input.ttlSeconds ?? defaultHoldTtlSeconds}::int * interval '1 second'
      from taken
      returning *
    ), movement as (
      insert into credit_ledger (workspace_id, hold_id, kind, amount, cause_key)
      select workspace_id, id, 'hold', amount, 'hold:' || cause_key from created
      on conflict (workspace_id, cause_key) do nothing
    )
    select * from created
    union all
    select * from credit_holds where workspace_id = ${input.workspaceId} and cause_key = ${input.causeKey}`;
  if (!hold) {
    const balance = await getBalance(tx, input.workspaceId);
    throw new ApiError('insufficient_credits', `This needs ${input.amount} credits and the workspace has ${balance.available} available.`);
  }
  return hold;
}

/**
 * Ends a hold: `charge` spends `amount` (at most the hold) and returns the rest; `release`
 * returns it all. Compare-and-set on status: only a held hold settles, so a second settle of any
 * kind changes nothing and answers the hold as it stands.
 */
async function settleHold(tx: Db, holdId: string, outcome: 'charged' | 'released', charge: number): Promise<CreditHold | undefined> {
  // One statement for the hold, the balance and the ledger: every hold and settle of a workspace
  // takes its balance row's lock until commit, so each round trip after it is everyone's wait.
  const [hold] = await tx<CreditHold[]>`
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
  if (hold) return hold;
  const [current] = await tx<CreditHold[]>`select * from credit_holds where id = ${holdId}`;
  return current;
}

export const chargeHold = (tx: Db, holdId: string, amount?: number) => settleHold(tx, holdId, 'charged', amount ?? Number.MAX_SAFE_INTEGER);
export const releaseHold = (tx: Db, holdId: string) => settleHold(tx, holdId, 'released', 0);

interface MovementRow extends Omit<CreditMovement, 'created_at'> {
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

/** Activities of the credit-hold workflow. */
export function createCreditActivities({ sql }: { sql: Sql }) {
  return {
    /** Releases a hold nobody settled before it expired; a settled hold is left as it is. */
    async releaseExpiredHold({ holdId }: { holdId: string }): Promise<CreditHold['status'] | 'missing'> {
      const hold = await sql.begin((tx) => releaseHold(tx, holdId));
      return hold?.status ?? 'missing';
    },
  };
}
export type CreditActivities = ReturnType<typeof createCreditActivities>;

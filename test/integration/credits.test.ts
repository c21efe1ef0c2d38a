import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  chargeHold,
  chargeHoldStatement,
  getBalance,
  grantCredits,
  holdCredits,
  releaseHold,
} from '../../store/platform/credits.js';
import { creditHoldWorkflow } from '../../workflows/platform/credit-hold.js';
import {
  creditHoldSettledSignal,
  creditHoldStateQuery,
  creditHoldWorkflowId,
} from '../../workflows/platform/credit-hold.contract.js';
import { watchCreditHold } from '../../activities/platform/credit-hold-watchdog.js';
import { CreditHoldStatusKey, WorkspaceIdKey } from '../../workflows/shared/search-attributes.js';
import { commitWith, commitWithAll, createSql, savepoint, transaction } from '../../db/sql.js';
import { useTestStack, withKey } from '../support/test-stack.js';
import { useTimeSkippingWorker } from '../support/time-skipping.js';
import { createCreditActivities } from '../../activities/platform/credits.js';

const { stack } = useTestStack({ workspaces: false });

const ledger = (workspaceId: string) =>
  stack.sql<{ kind: string; amount: number; cause_key: string }[]>`
    select kind, amount, cause_key from credit_ledger where workspace_id = ${workspaceId} order by id`;

describe('the credit ledger', () => {
  it('grants once per cause key, however often the grant is retried', async () => {
    const ws = await stack.createWorkspace();
    for (let i = 0; i < 3; i += 1)
      await grantCredits(stack.sql, { workspaceId: ws.workspaceId, amount: 50, causeKey: 'promo-1' });
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 50, held: 0, spent: 0 });
    expect(await ledger(ws.workspaceId)).toEqual([{ kind: 'grant', amount: 50, cause_key: 'promo-1' }]);
  });

  it('refuses a hold that would take the balance below zero, writing nothing', async () => {
    const ws = await stack.createWorkspace();
    await grantCredits(stack.sql, { workspaceId: ws.workspaceId, amount: 10, causeKey: 'g' });
    const exact = await stack.sql.begin((tx) =>
      holdCredits(tx, { workspaceId: ws.workspaceId, amount: 10, causeKey: 'op-1', ttlSeconds: 60 }),
    );
    expect(exact.status).toBe('held');
    await expect(
      stack.sql.begin((tx) =>
        holdCredits(tx, { workspaceId: ws.workspaceId, amount: 1, causeKey: 'op-2', ttlSeconds: 60 }),
      ),
    ).rejects.toMatchObject({ code: 'insufficient_credits', status: 409 });
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 0, held: 10, spent: 0 });
    expect((await ledger(ws.workspaceId)).map((r) => r.kind)).toEqual(['grant', 'hold']);
  });

  it('answers a hold asked again for the same cause with the same hold, holding once, even with nothing left', async () => {
    const ws = await stack.createWorkspace();
    await grantCredits(stack.sql, { workspaceId: ws.workspaceId, amount: 10, causeKey: 'g' });
    const first = await stack.sql.begin((tx) =>
      holdCredits(tx, { workspaceId: ws.workspaceId, amount: 10, causeKey: 'op-1', ttlSeconds: 60 }),
    );
    // The balance is now 0 available: a second hold of the same cause is the first, not a refusal.
    const again = await stack.sql.begin((tx) =>
      holdCredits(tx, { workspaceId: ws.workspaceId, amount: 10, causeKey: 'op-1', ttlSeconds: 60 }),
    );
    expect(again).toEqual(first);
    expect(first).toMatchObject({
      workspace_id: ws.workspaceId,
      amount: 10,
      charged: 0,
      status: 'held',
      cause_key: 'op-1',
    });
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 0, held: 10, spent: 0 });
    expect(await ledger(ws.workspaceId)).toEqual([
      { kind: 'grant', amount: 10, cause_key: 'g' },
      { kind: 'hold', amount: 10, cause_key: 'hold:op-1' },
    ]);
  });

  it('charges a hold once: a retried charge or a late release changes nothing', async () => {
    const ws = await stack.createWorkspace();
    await grantCredits(stack.sql, { workspaceId: ws.workspaceId, amount: 20, causeKey: 'g' });
    const hold = await stack.sql.begin((tx) =>
      holdCredits(tx, { workspaceId: ws.workspaceId, amount: 8, causeKey: 'step-1', ttlSeconds: 60 }),
    );
    const again = await stack.sql.begin((tx) =>
      holdCredits(tx, { workspaceId: ws.workspaceId, amount: 8, causeKey: 'step-1', ttlSeconds: 60 }),
    );
    expect(again.id).toBe(hold.id);
    await stack.sql.begin((tx) => chargeHold(tx, hold.id, 5));
    await stack.sql.begin((tx) => chargeHold(tx, hold.id, 5));
    await stack.sql.begin((tx) => releaseHold(tx, hold.id));
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 15, held: 0, spent: 5 });
    expect(await ledger(ws.workspaceId)).toEqual([
      { kind: 'grant', amount: 20, cause_key: 'g' },
      { kind: 'hold', amount: 8, cause_key: 'hold:step-1' },
      { kind: 'charge', amount: 5, cause_key: `charge:${hold.id}` },
      { kind: 'release', amount: 3, cause_key: `release:${hold.id}` },
    ]);
  });

  it('lets only one of two concurrent holds take the last credits', async () => {
    const ws = await stack.createWorkspace();
    await grantCredits(stack.sql, { workspaceId: ws.workspaceId, amount: 5, causeKey: 'g' });
    const attempts = await Promise.allSettled(
      ['a', 'b'].map((cause) =>
        stack.sql.begin((tx) =>
          holdCredits(tx, { workspaceId: ws.workspaceId, amount: 5, causeKey: cause, ttlSeconds: 60 }),
        ),
      ),
    );
    expect(attempts.filter((a) => a.status === 'fulfilled')).toHaveLength(1);
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 0, held: 5, spent: 0 });
  });

  it('shows the balance and the ledger newest first, paged, through the API', async () => {
    const ws = await stack.createWorkspace();
    for (const cause of ['g1', 'g2', 'g3'])
      await grantCredits(stack.sql, { workspaceId: ws.workspaceId, amount: 1, causeKey: cause });
    expect((await stack.app.inject({ method: 'GET', url: '/credits/', headers: withKey(ws.apiKey) })).json()).toEqual({
      available: 3,
      held: 0,
      spent: 0,
    });
    const first = (
      await stack.app.inject({ method: 'GET', url: '/credits/ledger/?limit=2', headers: withKey(ws.apiKey) })
    ).json();
    expect(first.movements.map((m: { cause_key: string }) => m.cause_key)).toEqual(['g3', 'g2']);
    const second = (
      await stack.app.inject({
        method: 'GET',
        url: `/credits/ledger/?limit=2&before_id=${first.next_before_id}`,
        headers: withKey(ws.apiKey),
      })
    ).json();
    expect(second.movements.map((m: { cause_key: string }) => m.cause_key)).toEqual(['g1']);
    expect(second.next_before_id).toBeNull();
  });
});

describe('a settle sent with its COMMIT', () => {
  // Every queue and settle of a workspace locks its balance row until commit.
  const lockedOut = (workspaceId: string) =>
    stack.sql.begin(async (other) => {
      await other`set local lock_timeout = '300ms'`;
      return other<
        { spent: number }[]
      >`update credit_balances set updated_at = now() where workspace_id = ${workspaceId} returning spent`;
    });

  it('has committed, and let go of the balance row, by the time its answer arrives', async () => {
    const ws = await stack.createWorkspace();
    await grantCredits(stack.sql, { workspaceId: ws.workspaceId, amount: 10, causeKey: 'g' });
    const hold = await stack.sql.begin((tx) =>
      holdCredits(tx, { workspaceId: ws.workspaceId, amount: 4, causeKey: 'op', ttlSeconds: 60 }),
    );
    const answer = await transaction(stack.sql, async (tx) => {
      await tx`update credit_balances set updated_at = now() where workspace_id = ${ws.workspaceId}`;
      // Before the commit another writer of the row waits, and gives up after its lock timeout.
      await expect(lockedOut(ws.workspaceId)).rejects.toMatchObject({ code: '55P03' });
      return commitWith(chargeHoldStatement(tx, hold.id), async ([settled]) => {
        // As the answer is made: the row is free and the charge is there for everyone to see.
        const [row] = await lockedOut(ws.workspaceId);
        return { status: settled!.status, spentSeenOutside: row!.spent };
      });
    });
    expect(answer).toEqual({ status: 'charged', spentSeenOutside: 4 });
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 6, held: 0, spent: 4 });
  });

  it('rolls back everything before it when the statement fails', async () => {
    const ws = await stack.createWorkspace();
    await grantCredits(stack.sql, { workspaceId: ws.workspaceId, amount: 10, causeKey: 'g' });
    // A pool of one connection, so the connection the transaction used is the one looked at after.
    const one = createSql(stack.databaseUrl, { max: 1 });
    try {
      const attempt = transaction(one, async (tx) => {
        await tx`update credit_balances set available = available + 1000 where workspace_id = ${ws.workspaceId}`;
        // The grant's cause key again: the ledger's unique constraint refuses it.
        return commitWith(
          tx`insert into credit_ledger (workspace_id, kind, amount, cause_key) values (${ws.workspaceId}, 'grant', 1000, 'g')`,
        );
      });
      await expect(attempt).rejects.toMatchObject({ code: '23505' });
      expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 10, held: 0, spent: 0 });
      expect(await ledger(ws.workspaceId)).toEqual([{ kind: 'grant', amount: 10, cause_key: 'g' }]);
      // The connection went back to the pool clean: nothing of the failed transaction lingers on it.
      const [me] = await one<{ pid: number }[]>`select pg_backend_pid() as pid`;
      const [backend] = await stack.sql<{ state: string }[]>`select state from pg_stat_activity where pid = ${me!.pid}`;
      expect(backend!.state).toBe('idle');
    } finally {
      await one.end();
    }
  });

  it("sends several final statements in order with the COMMIT: each one's rows answered, and a failing one rolls back them all", async () => {
    const ws = await stack.createWorkspace();
    await grantCredits(stack.sql, { workspaceId: ws.workspaceId, amount: 10, causeKey: 'g' });
    const answered = await transaction(stack.sql, async (tx) => {
      const [before] = await tx<
        { available: number }[]
      >`select available from credit_balances where workspace_id = ${ws.workspaceId} for update`;
      return commitWithAll(
        [
          tx`update credit_balances set available = available + 5 where workspace_id = ${ws.workspaceId} returning available`,
          // Sent after the first without waiting for it, so it reads what the first wrote.
          tx`update credit_balances set available = available * 2 where workspace_id = ${ws.workspaceId} returning available`,
        ],
        ([first, second]) => [before!.available, first![0]!.available, second![0]!.available],
      );
    });
    expect(answered).toEqual([10, 15, 30]);
    const failing = transaction(stack.sql, async (tx) =>
      commitWithAll(
        [
          tx`update credit_balances set available = available + 1000 where workspace_id = ${ws.workspaceId}`,
          tx`insert into credit_ledger (workspace_id, kind, amount, cause_key) values (${ws.workspaceId}, 'grant', 1000, 'g')`,
          tx`update credit_balances set held = held + 1 where workspace_id = ${ws.workspaceId}`,
        ],
        () => 'committed',
      ),
    );
    await expect(failing).rejects.toMatchObject({ code: '23505' });
    expect(await getBalance(stack.sql, ws.workspaceId)).toMatchObject({ available: 30, held: 0 });
  });

  it('keeps a savepoint of its own: a failure inside rolls back to it and the rest commits', async () => {
    const ws = await stack.createWorkspace();
    await grantCredits(stack.sql, { workspaceId: ws.workspaceId, amount: 10, causeKey: 'g' });
    const hold = await stack.sql.begin((tx) =>
      holdCredits(tx, { workspaceId: ws.workspaceId, amount: 3, causeKey: 'op', ttlSeconds: 60 }),
    );
    const caught = await transaction(stack.sql, async (tx) => {
      const failure = await savepoint(
        tx,
        (sp) =>
          sp`insert into credit_ledger (workspace_id, kind, amount, cause_key) values (${ws.workspaceId}, 'grant', 5, 'g')`,
      ).catch((error: { code?: string }) => error.code);
      return commitWith(chargeHoldStatement(tx, hold.id), () => failure);
    });
    expect(caught).toBe('23505');
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 7, held: 0, spent: 3 });
  });
});

describe('the credit-hold workflow', () => {
  const taskQueue = 'credit-hold-test';
  const temporal = useTimeSkippingWorker(taskQueue, () => createCreditActivities({ sql: stack.sql }));
  let env: TestWorkflowEnvironment;
  beforeAll(() => void ({ env } = temporal));

  /** 30 of 100 credits held for a day, watched by the workflow on the time-skipping server. */
  async function watchedHold() {
    const ws = await stack.createWorkspace();
    await grantCredits(stack.sql, { workspaceId: ws.workspaceId, amount: 100, causeKey: 'g' });
    const hold = await stack.sql.begin((tx) =>
      holdCredits(tx, { workspaceId: ws.workspaceId, amount: 30, causeKey: 'op', ttlSeconds: 24 * 3600 }),
    );
    const handle = await env.client.workflow.start(creditHoldWorkflow, {
      taskQueue,
      workflowId: creditHoldWorkflowId(hold.id),
      args: [{ holdId: hold.id, workspaceId: ws.workspaceId, expiresAt: hold.expires_at.toISOString() }],
    });
    return { ws, hold, handle };
  }

  it('releases a hold nobody settled once it expires, a day later in workflow time', async () => {
    const { ws, handle } = await watchedHold();
    expect(await handle.query(creditHoldStateQuery)).toMatchObject({ status: 'held' });
    const result = await handle.result();
    expect(result).toMatchObject({ status: 'released', releasedByWatchdog: true });
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 100, held: 0, spent: 0 });
  });

  it('leaves a hold alone once its owner charged it and signalled', async () => {
    const { ws, hold, handle } = await watchedHold();
    await stack.sql.begin((tx) => chargeHold(tx, hold.id));
    await handle.signal(creditHoldSettledSignal, { outcome: 'charged' });
    expect(await handle.result()).toMatchObject({ status: 'charged', releasedByWatchdog: false });
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 70, held: 0, spent: 30 });
  });
});

describe('watchCreditHold on the real Temporal server', () => {
  it('starts one watchdog per hold, which releases it at expiry and shows its status to operators', async () => {
    const ws = await stack.createWorkspace();
    await grantCredits(stack.sql, { workspaceId: ws.workspaceId, amount: 10, causeKey: 'g' });
    const hold = await stack.sql.begin((tx) =>
      holdCredits(tx, { workspaceId: ws.workspaceId, amount: 4, causeKey: 'op', ttlSeconds: 1 }),
    );
    const temporal = { client: stack.client, taskQueue: stack.taskQueue };
    await watchCreditHold(temporal, hold);
    await watchCreditHold(temporal, hold); // a retried caller: no second workflow
    const handle = stack.client.workflow.getHandle(creditHoldWorkflowId(hold.id));
    expect(await handle.result()).toMatchObject({ status: 'released', releasedByWatchdog: true });
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 10, held: 0, spent: 0 });
    const described = await handle.describe();
    expect(described.typedSearchAttributes.get(WorkspaceIdKey)).toBe(ws.workspaceId);
    expect(described.typedSearchAttributes.get(CreditHoldStatusKey)).toBe('released');
  });
});

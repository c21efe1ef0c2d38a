/**
 * The outbox: an event is written in the caller's transaction (committed with the change, gone
 * with a rollback) and its payload is checked against the catalogue.
 */
import { describe, expect, it } from 'vitest';
import { eventTypes, criticalEventTypes, WorkspaceEventSchema } from '../../domain/notifications/events.js';
import { eventById, recordWorkspaceEvent } from '../../store/notifications/outbox.js';
import { useTestDatabase } from '../support/database.js';

const db = useTestDatabase();

async function workspace(): Promise<string> {
  const [w] = await db.sql<
    { id: string }[]
  >`insert into workspaces (name, plan) values ('Outbox', 'paid') returning id`;
  return w!.id;
}

describe('workspace events', () => {
  it('commit with the transaction that records them and vanish with its rollback', async () => {
    const workspaceId = await workspace();
    const id = await db.sql.begin((tx) =>
      recordWorkspaceEvent(tx, { workspaceId, type: 'credits.low', payload: { balance: 40, threshold: 100 } }),
    );
    const event = await eventById(db.sql, id);
    expect(event).toMatchObject({
      id,
      type: 'credits.low',
      workspace_id: workspaceId,
      payload: { balance: 40, threshold: 100 },
    });
    expect(WorkspaceEventSchema.parse(event)).toBeTruthy();

    let rolledBack: string | undefined;
    await expect(
      db.sql.begin(async (tx) => {
        rolledBack = await recordWorkspaceEvent(tx, {
          workspaceId,
          type: 'billing.payment_failed',
          payload: {
            invoice_id: 'in_1',
            amount_due_cents: 4900,
            currency: 'eur',
            grace_ends_at: new Date().toISOString(),
          },
        });
        throw new Error('the change failed');
      }),
    ).rejects.toThrow('the change failed');
    expect(await eventById(db.sql, rolledBack!)).toBeUndefined();
  });

  it('refuse a payload that does not fit its type', async () => {
    const workspaceId = await workspace();
    await expect(
      db.sql.begin((tx) =>
        recordWorkspaceEvent(tx, {
          workspaceId,
          type: 'billing.payment_failed',
          payload: {
            invoice_id: 'in_1',
            amount_due_cents: 4900,
            currency: 'EUR',
            grace_ends_at: new Date().toISOString(),
          },
        }),
      ),
    ).rejects.toThrow();
    const [{ n }] =
      (await db.sql`select count(*)::int as n from workspace_events where workspace_id = ${workspaceId}`) as unknown as [
        { n: number },
      ];
    expect(n).toBe(0);
  });

  it('the catalogue holds the billing types and marks checkpoints critical', () => {
    expect(eventTypes).toEqual(
      expect.arrayContaining(['billing.payment_failed', 'credits.low', 'account.checkpoint', 'reply.received']),
    );
    expect(criticalEventTypes.has('account.checkpoint')).toBe(true);
    expect(criticalEventTypes.has('reply.received')).toBe(false);
  });
});

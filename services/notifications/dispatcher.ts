/**
 * The event dispatcher (issue 21; decision 038): hands each committed workspace event to its
 * delivery workflow. Woken by the outbox's NOTIFY at commit, and polling every second besides, it
 * takes undispatched events (oldest first, locked with SKIP LOCKED so several workers share),
 * starts `notification-event/<id>` for each (a start already made is Temporal's refusal, taken as
 * done) and marks them dispatched in the same transaction. A process killed in between leaves
 * them undispatched; the next pass starts them again, which Temporal refuses: nothing twice.
 */
import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import type { Sql } from '../../db/sql.js';
import { markEventsDispatched, undispatchedEvents } from '../../store/notifications/outbox.js';
import { notificationDigestCron, notificationDigestWorkflowId, notificationEventWorkflowId } from '../../workflows/notifications/notification-event.contract.js';

export interface EventDispatcher {
  /** Runs one pass now; answers how many events it handed on. */
  kick(): Promise<number>;
  stop(): Promise<void>;
}

export function startEventDispatcher(options: { sql: Sql; client: Client; taskQueue: string; pollMs?: number; batch?: number; digest?: boolean }): EventDispatcher {
  const { sql, client, taskQueue } = options;
  const batch = options.batch ?? 200;
  let stopped = false;
  let running: Promise<number> | null = null;
  let again = false;

  async function pass(): Promise<number> {
    let total = 0;
    for (;;) {
      const handed = await sql.begin(async (tx) => {
        const events = await undispatchedEvents(tx, batch);
        await Promise.all(
          events.map((e) =>
            client.workflow
              .start('notificationEventWorkflow', { workflowId: notificationEventWorkflowId(e.id), taskQueue, args: [{ eventId: e.id }] })
              .catch((error: unknown) => {
                if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
              }),
          ),
        );
        await markEventsDispatched(tx, events.map((e) => e.id));
        return events.length;
      });
      total += handed;
      if (handed < batch || stopped) return total;
    }
  }

  function kick(): Promise<number> {
    if (stopped) return Promise.resolve(0);
    if (running) {
      again = true;
      return running;
    }
    running = pass()
      .catch(() => 0)
      .finally(() => {
        running = null;
        if (again && !stopped) {
          again = false;
          void kick();
        }
      });
    return running;
  }

  // The daily digest's cron workflow, started once for the namespace's task queue (already running: nothing to do).
  if (options.digest !== false) {
    void client.workflow
      .start('notificationDigestWorkflow', { workflowId: notificationDigestWorkflowId, taskQueue, cronSchedule: notificationDigestCron, args: [] })
      .catch(() => undefined);
  }
  const listening = sql.listen('workspace_events', () => void kick()).catch(() => null);
  const timer = setInterval(() => void kick(), options.pollMs ?? 1000);
  void kick();

  return {
    kick,
    async stop() {
      stopped = true;
      clearInterval(timer);
      const listener = await listening;
      await listener?.unlisten().catch(() => undefined);
      await running;
    },
  };
}

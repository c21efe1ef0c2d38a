/**
 * The event dispatcher (decisions 038, 045): hands committed workspace events to delivery batches.
 * Woken by the outbox's NOTIFY at commit (and polling every second besides), it waits `windowMs`
 * for more events to commit, then takes up to `batch` undispatched events (oldest first, locked
 * with SKIP LOCKED so several workers share), starts one `notification-batch/<first event id>`
 * workflow with them and marks them dispatched in the same transaction. A process killed between
 * the start and the commit leaves them undispatched; the next pass takes them again (perhaps with
 * others) and its start is refused by the workflow id: it then marks only the events that workflow
 * was started with, read from its history, and the rest go in the next batch. Nothing is handed on
 * twice and nothing is lost.
 */
import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import type { Sql } from '../../db/sql.js';
import { markEventsDispatched, undispatchedEvents } from '../../store/notifications/outbox.js';
import {
  notificationBatchMax,
  notificationBatchWorkflowId,
  notificationDigestCron,
  notificationDigestWorkflowId,
  type NotificationBatchInput,
} from '../../workflows/notifications/notification-event.contract.js';

export interface EventDispatcher {
  /** Runs one pass now (no window); answers how many events it handed on. */
  kick(): Promise<number>;
  stop(): Promise<void>;
}

/** The events a batch workflow was started with (the first event of its history). */
async function startedWith(client: Client, workflowId: string): Promise<string[]> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const payload = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
  if (!payload) throw new Error(`${workflowId} has no input in its history.`);
  return defaultPayloadConverter.fromPayload<NotificationBatchInput>(payload).eventIds;
}

export function startEventDispatcher(options: {
  sql: Sql;
  client: Client;
  taskQueue: string;
  pollMs?: number;
  windowMs?: number;
  batch?: number;
  digest?: boolean;
}): EventDispatcher {
  const { sql, client, taskQueue } = options;
  const batch = Math.min(options.batch ?? notificationBatchMax, notificationBatchMax);
  const windowMs = options.windowMs ?? 100;
  let stopped = false;
  let running: Promise<number> | null = null;
  let again = false;
  let waiting: NodeJS.Timeout | null = null;

  async function pass(): Promise<number> {
    let total = 0;
    for (;;) {
      const { claimed, handed } = await sql.begin(async (tx) => {
        const events = await undispatchedEvents(tx, batch);
        if (events.length === 0) return { claimed: 0, handed: 0 };
        const ids = events.map((e) => e.id);
        const workflowId = notificationBatchWorkflowId(ids[0]!);
        let started = ids;
        try {
          await client.workflow.start('notificationBatchWorkflow', {
            workflowId,
            taskQueue,
            args: [{ eventIds: ids } satisfies NotificationBatchInput],
          });
        } catch (error) {
          if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
          const theirs = new Set(await startedWith(client, workflowId));
          started = ids.filter((id) => theirs.has(id));
        }
        await markEventsDispatched(tx, started);
        return { claimed: events.length, handed: started.length };
      });
      total += handed;
      if (claimed < batch || stopped) return total;
    }
  }

  function kick(): Promise<number> {
    if (stopped) return Promise.resolve(0);
    if (running) {
      again = true;
      return running;
    }
    // A failed pass rolled its claim back: its events stay undispatched and the next pass (the
    // poll below, within a second) hands them over, so nothing is lost by not throwing here.
    running = pass()
      .catch(() => 0)
      .finally(() => {
        running = null;
        if (again && !stopped) {
          again = false;
          soon();
        }
      });
    return running;
  }

  /** A pass after the window: events committing together go in one batch. */
  function soon() {
    if (stopped || waiting) return;
    waiting = setTimeout(() => {
      waiting = null;
      void kick();
    }, windowMs);
  }

  // The daily digest's cron workflow, started once for the namespace's task queue (already running: nothing to do).
  if (options.digest !== false) {
    void client.workflow
      .start('notificationDigestWorkflow', {
        workflowId: notificationDigestWorkflowId(taskQueue),
        taskQueue,
        cronSchedule: notificationDigestCron,
        args: [],
      })
      // Already running is the usual answer; any other refusal is met again at the next start.
      .catch(() => undefined);
  }
  // LISTEN only hurries a pass along: without it the poll still hands every event over within pollMs.
  const listening = sql.listen('workspace_events', () => soon()).catch(() => null);
  const timer = setInterval(() => void kick(), options.pollMs ?? 1000);
  void kick();

  return {
    kick,
    async stop() {
      stopped = true;
      clearInterval(timer);
      if (waiting) clearTimeout(waiting);
      const listener = await listening;
      await listener?.unlisten().catch(() => undefined);
      await running;
    },
  };
}

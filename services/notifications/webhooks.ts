/**
 * Webhook endpoints' use cases (createWebhookEndpoint, updateWebhookEndpoint and the rest): a URL
 * that deliveries would refuse is refused when it is registered or changed, a secret made and
 * sealed at creation and rotation (shown once), and replay: one message, or every message to the
 * endpoint since a time, queued again under a new run of its delivery (same `webhook-id`) and
 * delivered by its own workflow.
 */
import { randomUUID } from 'node:crypto';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Sql } from '../../db/sql.js';
import type { Integrations } from '../../integrations/config.js';
import { newWebhookSecret } from '../../integrations/webhooks/signing.js';
import { replayMax } from '../../domain/notifications/webhooks.js';
import { ApiError, ValidationRefusal } from '../../domain/shared/errors.js';
import { eventById, eventsSince } from '../../store/notifications/outbox.js';
import { reopenDelivery, webhookDeliveryOf } from '../../store/notifications/deliveries.js';
import { insertEndpoint, rotateSecret, updateEndpoint, type EndpointRow } from '../../store/notifications/webhooks.js';
import { notificationReplayWorkflowId } from '../../workflows/notifications/notification-event.contract.js';
import { sealFor, sealingContext } from './delivery.js';
import type { TemporalHandle } from '../deps.js';

/**
 * Refuses, before anything is stored, a URL every delivery would refuse (a private, loopback,
 * link-local or metadata address), with 422 naming `url`; the sender's setting decides, so local
 * twins allowed at delivery are allowed here. Deliveries check again: a name can change address.
 */
async function requireDeliverableUrl(integrations: Pick<Integrations, 'notifications'>, url: string): Promise<void> {
  const refusal = await integrations.notifications.webhooks.refusal(url);
  if (refusal) throw new ValidationRefusal([{ loc: ['body', 'url'], msg: refusal, type: 'value_error', input: url }]);
}

export async function createEndpoint(
  sql: Sql,
  integrations: Pick<Integrations, 'secretsKeys' | 'notifications'>,
  input: {
    workspaceId: string;
    url: string;
    description: string;
    eventTypes: string[];
    enabled: boolean;
    createdBy: string | null;
  },
): Promise<{ endpoint: EndpointRow; secret: string }> {
  await requireDeliverableUrl(integrations, input.url);
  const id = randomUUID();
  const secret = newWebhookSecret();
  const endpoint = await insertEndpoint(sql, {
    id,
    ...input,
    secretSealed: await sealFor(sql, integrations, secret, sealingContext.webhookSecret(id)),
  });
  return { endpoint, secret };
}

/** Changes an endpoint (a new URL checked as at creation); undefined when it is not the workspace's. */
export async function changeEndpoint(
  sql: Sql,
  integrations: Pick<Integrations, 'notifications'>,
  workspaceId: string,
  id: string,
  patch: { url?: string; description?: string; event_types?: string[]; enabled?: boolean },
): Promise<EndpointRow | undefined> {
  if (patch.url !== undefined) await requireDeliverableUrl(integrations, patch.url);
  return updateEndpoint(sql, workspaceId, id, patch);
}

export async function rotateEndpointSecret(
  sql: Sql,
  integrations: Pick<Integrations, 'secretsKeys'>,
  workspaceId: string,
  id: string,
  overlapSeconds: number,
) {
  const secret = newWebhookSecret();
  const endpoint = await rotateSecret(
    sql,
    workspaceId,
    id,
    await sealFor(sql, integrations, secret, sealingContext.webhookSecret(id)),
    overlapSeconds,
  );
  return endpoint ? { endpoint, secret } : undefined;
}

/** Queues the messages again; answers how many. An event of another workspace is 404. */
export async function replayEndpoint(
  sql: Sql,
  temporal: TemporalHandle,
  endpoint: EndpointRow,
  what: { eventId?: string; since?: Date },
): Promise<number> {
  let eventIds: string[];
  if (what.eventId) {
    const event = await eventById(sql, what.eventId);
    if (!event || event.workspace_id !== endpoint.workspace_id)
      throw new ApiError('not_found', 'No event with this id in the workspace.');
    eventIds = [event.id];
  } else {
    const events = await eventsSince(sql, endpoint.workspace_id, what.since!, replayMax);
    eventIds = events
      .filter((e) => endpoint.event_types.length === 0 || endpoint.event_types.includes(e.type))
      .map((e) => e.id);
  }
  for (const eventId of eventIds) {
    const delivery = await sql.begin(async (tx) => {
      const id = await webhookDeliveryOf(tx, endpoint.workspace_id, endpoint.id, eventId);
      return { id, run: await reopenDelivery(tx, id) };
    });
    await temporal.client.workflow
      .start('notificationReplayWorkflow', {
        workflowId: notificationReplayWorkflowId(delivery.id, delivery.run),
        taskQueue: temporal.taskQueue,
        args: [{ deliveryId: delivery.id, run: delivery.run }],
      })
      .catch((error: unknown) => {
        if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
      });
  }
  return eventIds.length;
}

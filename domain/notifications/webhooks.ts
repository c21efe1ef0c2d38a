/**
 * Outbound webhooks (decision 038): endpoint schemas, the retry schedule and the pure rules of a
 * delivery attempt. Signing follows the Standard Webhooks specification
 * (integrations/webhooks/signing.ts).
 */
import { z } from 'zod';
import { TimestampSchema, UuidSchema, textSchema } from '../shared/common.js';
import { EventTypeSchema } from './events.js';

/**
 * Seconds to wait before each attempt, Svix's schedule: at once, then 5 s, 5 min, 30 min, 2 h,
 * 5 h, 10 h and 10 h (8 attempts over about 27.6 hours).
 */
export const retryScheduleSeconds = [0, 5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 10 * 3600] as const;
/** A 2xx within this many seconds counts; anything later is a timeout. */
export const deliveryTimeoutSeconds = 15;
/** An endpoint whose attempts have all failed for this long is disabled and its owner told. */
export const disableAfterFailingMs = 5 * 24 * 3600 * 1000;
/** How much of a response an attempt keeps. */
export const responseExcerptChars = 1000;
/** How long the previous secret keeps signing after a rotation, unless the request says otherwise. */
export const rotationOverlapDefaultSeconds = 24 * 3600;
export const rotationOverlapMaxSeconds = 7 * 24 * 3600;
export const maxRedirects = 3;
export const endpointsMax = 20;

export const WebhookUrlSchema = z
  .string()
  .min(1)
  .max(2048)
  // No whitespace or control characters anywhere (Postgres cannot store a NUL; no URL has one).
  .regex(/^https?:\/\/[^\s/?#\u0000-\u001f\u007f]+[^\s\u0000-\u001f\u007f]*$/i, 'must be an http or https URL')
  .describe(
    'Where events are POSTed: http or https. Loopback, private, link-local and metadata addresses (in any numeric form, or a name resolving to one) are refused when the endpoint is added or its URL changed (422), and again at every delivery.',
  );

export const WebhookEndpointSchema = z
  .object({
    id: UuidSchema,
    url: z.string(),
    description: z.string(),
    event_types: z.array(EventTypeSchema).describe('The types sent here; empty means every type.'),
    enabled: z.boolean(),
    disabled_reason: z
      .string()
      .nullable()
      .describe('Why the service disabled it (failing for 5 days); null when enabled or disabled by a person.'),
    failing_since: TimestampSchema.nullable(),
    previous_secret_expires_at: TimestampSchema.nullable().describe(
      'While set, the previous secret signs too (a second `v1,` signature).',
    ),
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
  })
  .meta({ id: 'WebhookEndpoint' });
export type WebhookEndpoint = z.infer<typeof WebhookEndpointSchema>;

export const WebhookEndpointWithSecretSchema = WebhookEndpointSchema.extend({
  secret: z.string().describe('The signing secret (`whsec_` and base64). Shown only in this answer; keep it.'),
}).meta({ id: 'WebhookEndpointWithSecret' });

export const WebhookEndpointListSchema = z
  .object({ endpoints: z.array(WebhookEndpointSchema) })
  .meta({ id: 'WebhookEndpointList' });

const EventTypesSchema = z
  .array(EventTypeSchema)
  .max(50)
  .transform((t) => [...new Set(t)])
  .describe('A type given twice counts once.');

export const CreateWebhookEndpointSchema = z
  .object({
    url: WebhookUrlSchema,
    description: textSchema(0, 500).optional(),
    event_types: EventTypesSchema.optional(),
    enabled: z.boolean().optional(),
  })
  .strict()
  .meta({ id: 'CreateWebhookEndpoint' });

export const UpdateWebhookEndpointSchema = z
  .object({
    url: WebhookUrlSchema.optional(),
    description: textSchema(0, 500).optional(),
    event_types: EventTypesSchema.optional(),
    enabled: z
      .boolean()
      .optional()
      .describe('true enables it again (and clears failing_since); false stops deliveries to it.'),
  })
  .strict()
  .meta({ id: 'UpdateWebhookEndpoint' });

export const RotateSecretSchema = z
  .object({
    overlap_seconds: z
      .int()
      .min(0)
      .max(rotationOverlapMaxSeconds)
      .optional()
      .describe(
        `How long the previous secret keeps signing beside the new one (default ${rotationOverlapDefaultSeconds}); 0 ends it at once.`,
      ),
  })
  .strict()
  .meta({ id: 'RotateWebhookSecret' });

export const AttemptOutcomeSchema = z.enum(['succeeded', 'failed', 'timeout', 'refused', 'skipped']);
export type AttemptOutcome = z.infer<typeof AttemptOutcomeSchema>;

export const DeliveryAttemptSchema = z
  .object({
    id: z.int(),
    delivery_id: UuidSchema,
    webhook_id: z
      .string()
      .describe('The `webhook-id` header sent: the same for every attempt and replay of one message.'),
    event_id: UuidSchema,
    event_type: z.string(),
    attempt: z.int().min(1),
    trigger: z.enum(['scheduled', 'replay']),
    attempted_at: TimestampSchema,
    duration_ms: z.int().min(0),
    outcome: AttemptOutcomeSchema,
    status_code: z.int().nullable(),
    response_excerpt: z
      .string()
      .nullable()
      .describe(`The first ${responseExcerptChars} characters of the response body.`),
    error: z.string().nullable(),
  })
  .meta({ id: 'WebhookDeliveryAttempt' });

export const DeliveryAttemptListSchema = z
  .object({
    attempts: z.array(DeliveryAttemptSchema),
    next_before: z.int().nullable().describe('Pass as `before` for older attempts; null at the end.'),
  })
  .meta({ id: 'WebhookDeliveryAttemptList' });

export const ReplaySchema = z
  .object({
    event_id: UuidSchema.optional().describe('Replay this one message.'),
    since: TimestampSchema.optional().describe(
      'Replay every message to this endpoint whose event occurred at or after this time (at most 1,000).',
    ),
  })
  .strict()
  .refine((r) => (r.event_id === undefined) !== (r.since === undefined), 'give exactly one of event_id and since')
  .meta({ id: 'WebhookReplay' });
export const ReplayAnswerSchema = z
  .object({ replayed: z.int().min(0).describe('How many messages were queued again.') })
  .meta({ id: 'WebhookReplayAnswer' });
export const replayMax = 1000;

/** The `webhook-id` of a delivery: stable across retries and replays of the message. */
export const webhookIdOf = (deliveryId: string) => `msg_${deliveryId.replace(/-/g, '')}`;

export type AttemptResult =
  | { kind: 'succeeded'; statusCode: number }
  | { kind: 'failed'; statusCode: number | null; retryAfterSeconds?: number; permanent?: boolean }
  | { kind: 'skipped'; reason: string };

/** What the workflow does after an attempt: stop, or wait this long before the next one. */
export function decideNext(
  result: AttemptResult,
  attempt: number,
): { kind: 'done' } | { kind: 'retry'; afterSeconds: number } | { kind: 'give_up' } {
  if (result.kind !== 'failed') return { kind: 'done' };
  if (result.permanent || attempt >= retryScheduleSeconds.length) return { kind: 'give_up' };
  const scheduled = retryScheduleSeconds[attempt]!;
  return { kind: 'retry', afterSeconds: Math.max(scheduled, result.retryAfterSeconds ?? 0) };
}

/** Whether a failure at `at` disables an endpoint that has been failing since `failingSince`. */
export function shouldDisable(failingSince: Date | null, at: Date): boolean {
  return failingSince !== null && at.getTime() - failingSince.getTime() >= disableAfterFailingMs;
}

/** One delivery's attempt result, as the batch activities answer it. */
export interface AttemptedDelivery {
  id: string;
  run: number;
  result: AttemptResult;
}

/**
 * The retries after attempt number `attempt`: the deliveries that failed and may try again,
 * grouped by how long they wait (the schedule's next step, or a longer Retry-After), so a batch
 * whose deliveries fail alike waits on one timer and retries in one activity. Ordered by wait.
 */
export function retryGroups(
  attempted: AttemptedDelivery[],
  attempt: number,
): { afterSeconds: number; deliveries: { id: string; run: number }[] }[] {
  const groups = new Map<number, { id: string; run: number }[]>();
  for (const d of attempted) {
    const next = decideNext(d.result, attempt);
    if (next.kind !== 'retry') continue;
    const group = groups.get(next.afterSeconds) ?? [];
    group.push({ id: d.id, run: d.run });
    groups.set(next.afterSeconds, group);
  }
  return [...groups.entries()]
    .sort(([a], [b]) => a - b)
    .map(([afterSeconds, deliveries]) => ({ afterSeconds, deliveries }));
}

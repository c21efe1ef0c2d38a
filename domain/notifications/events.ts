/**
 * The catalogue of workspace events (decision 038): one zod schema per event type. An event is
 * written to the outbox (workspace_events) in the same transaction as the change that causes it,
 * and delivered as the envelope below to webhooks, team chat and members' email.
 *
 * Adding a feature's event: add its payload schema to `eventPayloadSchemas` (and to
 * `criticalEventTypes` when a member must not be able to mute it), then call
 * recordWorkspaceEvent(tx, …) from the store function that makes the change, and give the type a
 * scenario in test/integration/notifications-catalogue.test.ts (the real change, a rule firing).
 */
import { z } from 'zod';
import { RoleSchema, TimestampSchema, UuidSchema } from '../shared/common.js';

const nullableUuid = UuidSchema.nullable();

/**
 * `credits.low` is recorded when a workspace's available credits fall from at least this many to
 * fewer (a hold or a revoke), once per crossing: a grant or release back to it or above re-arms it.
 */
export const creditsLowThreshold = 100;

/** Whether a change of the available balance from `before` to `after` crosses below the threshold. */
export const crossesCreditsLow = (before: number, after: number) =>
  before >= creditsLowThreshold && after < creditsLowThreshold;

/** The payload of each event type. Keys named `sequence_id` and `sender_profile_id` can be rule filters. */
export const eventPayloadSchemas = {
  'reply.received': z.object({
    message_id: UuidSchema,
    thread_id: UuidSchema,
    channel: z.enum(['email', 'pnet']),
    from_email: z.string().nullable(),
    from_profile_url: z.string().nullable(),
    subject: z.string().nullable(),
    sequence_contact_id: nullableUuid,
  }),
  'invitation.accepted': z.object({
    account_id: UuidSchema,
    sender_profile_id: nullableUuid,
    profile_url: z.string(),
    name: z.string().nullable(),
  }),
  'step.failed': z.object({
    step_id: UuidSchema,
    account_id: nullableUuid,
    sender_profile_id: nullableUuid,
    kind: z.string(),
    error_code: z.string().nullable(),
  }),
  'sequence_contact.finished': z.object({
    sequence_id: UuidSchema,
    sequence_contact_id: UuidSchema,
  }),
  'sequence_contact.stopped': z.object({
    sequence_id: UuidSchema,
    sequence_contact_id: UuidSchema,
    reason: z.string().nullable(),
  }),
  'account.checkpoint': z.object({
    account_id: UuidSchema,
    sender_profile_id: nullableUuid,
    checkpoint_until: TimestampSchema.nullable(),
  }),
  'account.disconnected': z.object({
    account_id: UuidSchema,
    sender_profile_id: nullableUuid,
  }),
  'account.daily_cap_reached': z.object({
    account_id: UuidSchema,
    sender_profile_id: nullableUuid,
    action: z.string(),
    limit: z.int().min(0),
  }),
  'account.weekly_cap_reached': z.object({
    account_id: UuidSchema,
    sender_profile_id: nullableUuid,
    action: z.string(),
    limit: z.int().min(0),
  }),
  'credits.low': z.object({
    balance: z.int().describe('The credits available just after the change that crossed the threshold'),
    threshold: z.int().describe(`The threshold crossed (${creditsLowThreshold})`),
  }),
  'billing.payment_failed': z.object({
    invoice_id: z.string(),
    amount_due_cents: z.int(),
    currency: z.string().regex(/^[a-z]{3}$/),
    grace_ends_at: TimestampSchema,
  }),
  'card.awaiting_approval': z.object({
    card_id: UuidSchema,
    conversation_id: nullableUuid,
    title: z.string(),
  }),
  'document.ready': z.object({
    document_id: UuidSchema,
    title: z.string(),
  }),
  'document.failed': z.object({
    document_id: UuidSchema,
    title: z.string(),
    error: z.string(),
  }),
  'column_run.finished': z.object({
    run_id: UuidSchema,
    table_id: UuidSchema,
    column_id: UuidSchema,
    status: z.string(),
    error: z.string().nullable(),
  }),
  'webhook.endpoint_disabled': z.object({
    endpoint_id: UuidSchema,
    url: z.string(),
    failing_since: TimestampSchema,
    reason: z.string(),
  }),
  /** The workspace's affiliate payout reached its PayPal account (status `paid`). */
  'affiliate.payout_sent': z.object({
    payout_id: UuidSchema,
    affiliate_id: UuidSchema,
    period: z.string(),
    amount_cents: z.int(),
    currency: z.string().regex(/^[a-z]{3}$/),
    paid_at: TimestampSchema,
  }),
  /** An admin changed a member's role (PATCH /workspace/members/{member_id}/). */
  'member.role_changed': z.object({
    member_id: UuidSchema,
    user_id: z.string().describe('The member’s identity-provider user id'),
    role_before: RoleSchema,
    role_after: RoleSchema,
    changed_by_member_id: nullableUuid.describe('The admin who changed it'),
  }),
  /** An admin removed a member: their bearer tokens, API keys and connected apps stopped working. */
  'member.removed': z.object({
    member_id: UuidSchema,
    user_id: z.string().describe('The removed member’s identity-provider user id'),
    email: z.string(),
    role_before: RoleSchema,
    removed_by_member_id: nullableUuid.describe('The admin who removed them'),
    revoked_api_keys: z.int().min(0).describe('The API keys they had created, revoked with the removal'),
  }),
  /** A person became a member: by signing the workspace up, on first use of their organisation's token, or by an invitation. */
  'member.joined': z.object({
    member_id: UuidSchema,
    user_id: z.string().describe('The new member’s identity-provider user id'),
    email: z.string(),
    role: RoleSchema,
    via: z.enum(['sign_up', 'first_use', 'invitation']),
    invitation_id: nullableUuid.describe('The invitation accepted, when they joined by one'),
  }),
  /** An admin invited a person by email (POST /workspace/invitations/, operationId inviteMember). */
  'member.invited': z.object({
    invitation_id: UuidSchema,
    email: z.string().describe('The invited address'),
    role: RoleSchema.describe('The role the person joins with'),
    invited_by_member_id: UuidSchema.describe('The admin who invited'),
    expires_at: TimestampSchema,
  }),
  /** A pending invitation was revoked by an admin, or replaced by a new invitation of the same address. */
  'member.invitation_revoked': z.object({
    invitation_id: UuidSchema,
    email: z.string(),
    revoked_by_member_id: UuidSchema.describe('The admin who revoked or replaced it'),
  }),
} as const;

export type EventType = keyof typeof eventPayloadSchemas;
export type EventPayload<T extends EventType> = z.input<(typeof eventPayloadSchemas)[T]>;
export const eventTypes = Object.keys(eventPayloadSchemas) as EventType[];
export const EventTypeSchema = z.enum(eventTypes as [EventType, ...EventType[]]).meta({ id: 'NotificationEventType' });

/** What each type means, for the catalogue route and the team-chat and email texts. */
export const eventTitles: Record<EventType, string> = {
  'reply.received': 'A reply was received',
  'invitation.accepted': 'An invitation was accepted',
  'step.failed': 'A step failed',
  'sequence_contact.finished': 'A sequence contact finished',
  'sequence_contact.stopped': 'A sequence contact was stopped',
  'account.checkpoint': 'An account is at a checkpoint',
  'account.disconnected': 'An account was disconnected',
  'account.daily_cap_reached': 'An account reached its daily cap',
  'account.weekly_cap_reached': 'An account reached its weekly cap',
  'credits.low': `Credits are running low: fewer than ${creditsLowThreshold} available`,
  'billing.payment_failed': 'A payment failed',
  'card.awaiting_approval': 'A card is waiting for approval',
  'document.ready': 'A document is ready',
  'document.failed': 'A document failed',
  'column_run.finished': 'A column run finished',
  'webhook.endpoint_disabled': 'A webhook endpoint was disabled',
  'affiliate.payout_sent': 'An affiliate payout was sent',
  'member.role_changed': 'The role of a member was changed',
  'member.removed': 'A member was removed from the workspace',
  'member.joined': 'A member joined the workspace',
  'member.invited': 'A person was invited to the workspace',
  'member.invitation_revoked': 'An invitation to the workspace was revoked',
};

/** Events a member can neither mute nor move to a digest: they need someone now. */
export const criticalEventTypes: ReadonlySet<EventType> = new Set<EventType>([
  'account.checkpoint',
  'account.disconnected',
  'billing.payment_failed',
  'webhook.endpoint_disabled',
]);

const envelopeOf = <T extends EventType>(type: T) =>
  z
    .object({
      id: UuidSchema.describe('Stable: the same event always has this id, in every channel and every retry.'),
      type: z.literal(type),
      occurred_at: TimestampSchema,
      workspace_id: UuidSchema,
      payload: eventPayloadSchemas[type],
    })
    .meta({ id: `Event_${type.replace('.', '_')}`, description: eventTitles[type] });

/** One event as delivered (the webhook body, the events list): a union on `type`. */
export const WorkspaceEventSchema = z
  .discriminatedUnion(
    'type',
    eventTypes.map((t) => envelopeOf(t)) as unknown as [
      ReturnType<typeof envelopeOf>,
      ...ReturnType<typeof envelopeOf>[],
    ],
  )
  .meta({ id: 'WorkspaceEvent' });
export type WorkspaceEvent = {
  id: string;
  type: EventType;
  occurred_at: string;
  workspace_id: string;
  payload: Record<string, unknown>;
};

export function isEventType(value: string): value is EventType {
  return Object.hasOwn(eventPayloadSchemas, value);
}

/** Checks a payload against its type's schema: answers the parsed payload or throws (a programming error). */
export function parseEventPayload<T extends EventType>(type: T, payload: EventPayload<T>): Record<string, unknown> {
  return eventPayloadSchemas[type].parse(payload);
}

/** The keys of a payload a rule may filter on. */
export const filterKeys = ['sequence_id', 'sender_profile_id', 'account_id', 'table_id'] as const;

/**
 * Notification rules and member preferences (decision 038): an event type, with optional filters,
 * routed to one channel (members' email, a team-chat channel, a webhook endpoint); each member may
 * mute a type or take it in a daily digest, except the critical types. planDeliveries is the pure
 * fan-out of one event.
 */
import { z } from 'zod';
import { TimestampSchema, UuidSchema, lineSchema } from '../shared/common.js';
import { criticalEventTypes, EventTypeSchema, type EventType } from './events.js';

export const ChannelSchema = z.enum(['email', 'team_chat', 'webhook']).meta({ id: 'NotificationChannel' });
export type NotificationChannel = z.infer<typeof ChannelSchema>;
export const PreferenceModeSchema = z.enum(['each', 'digest', 'mute']).meta({ id: 'NotificationPreferenceMode' });
export type PreferenceMode = z.infer<typeof PreferenceModeSchema>;
export const rulesMax = 100;

export const RuleFiltersSchema = z
  .object({
    sequence_id: UuidSchema.optional(),
    sender_profile_id: UuidSchema.optional(),
    account_id: UuidSchema.optional(),
    table_id: UuidSchema.optional(),
  })
  .strict()
  .describe(
    "Every key given must equal the event payload's value of that key; an event without the key does not match.",
  )
  .meta({ id: 'NotificationRuleFilters' });
export type RuleFilters = z.infer<typeof RuleFiltersSchema>;

export const NotificationRuleSchema = z
  .object({
    id: UuidSchema,
    event_type: EventTypeSchema,
    filters: RuleFiltersSchema,
    channel: ChannelSchema,
    member_ids: z.array(UuidSchema).describe('email: the members told (empty: every member of the workspace).'),
    chat_channel_id: z
      .string()
      .nullable()
      .describe('team_chat: the channel. Kept when the team chat is disconnected, so a reconnect restores routing.'),
    chat_channel_name: z.string().nullable(),
    webhook_endpoint_id: UuidSchema.nullable(),
    enabled: z.boolean(),
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
  })
  .meta({ id: 'NotificationRule' });
export type NotificationRule = z.infer<typeof NotificationRuleSchema>;
export const NotificationRuleListSchema = z
  .object({ rules: z.array(NotificationRuleSchema) })
  .meta({ id: 'NotificationRuleList' });

const ChatChannelIdSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9_-]+$/, 'must be a channel id such as C0123ABC');

export const CreateRuleSchema = z
  .object({
    event_type: EventTypeSchema,
    filters: RuleFiltersSchema.optional(),
    channel: ChannelSchema,
    member_ids: z.array(UuidSchema).max(100).optional(),
    chat_channel_id: ChatChannelIdSchema.optional(),
    chat_channel_name: lineSchema(0, 255).optional(),
    webhook_endpoint_id: UuidSchema.optional(),
    enabled: z.boolean().optional(),
  })
  .strict()
  .superRefine((r, ctx) => {
    if (r.channel === 'team_chat' && !r.chat_channel_id)
      ctx.addIssue({ code: 'custom', path: ['chat_channel_id'], message: 'a team_chat rule needs chat_channel_id' });
    if (r.channel !== 'team_chat' && r.chat_channel_id)
      ctx.addIssue({ code: 'custom', path: ['chat_channel_id'], message: 'only a team_chat rule has a chat channel' });
    if (r.channel === 'webhook' && !r.webhook_endpoint_id)
      ctx.addIssue({
        code: 'custom',
        path: ['webhook_endpoint_id'],
        message: 'a webhook rule needs webhook_endpoint_id',
      });
    if (r.channel !== 'webhook' && r.webhook_endpoint_id)
      ctx.addIssue({ code: 'custom', path: ['webhook_endpoint_id'], message: 'only a webhook rule has an endpoint' });
    if (r.channel !== 'email' && r.member_ids?.length)
      ctx.addIssue({ code: 'custom', path: ['member_ids'], message: 'only an email rule names members' });
  })
  .meta({ id: 'CreateNotificationRule' });
export type CreateRule = z.infer<typeof CreateRuleSchema>;

export const UpdateRuleSchema = z
  .object({
    filters: RuleFiltersSchema.optional(),
    member_ids: z.array(UuidSchema).max(100).optional(),
    chat_channel_id: ChatChannelIdSchema.optional(),
    chat_channel_name: lineSchema(0, 255).optional(),
    enabled: z.boolean().optional(),
  })
  .strict()
  .meta({ id: 'UpdateNotificationRule' });

export const PreferenceSchema = z
  .object({
    event_type: EventTypeSchema,
    mode: PreferenceModeSchema,
    critical: z
      .boolean()
      .describe('A critical type is always sent as it happens; it cannot be muted or moved to the digest.'),
  })
  .meta({ id: 'NotificationPreference' });
export const PreferenceListSchema = z
  .object({ preferences: z.array(PreferenceSchema) })
  .meta({ id: 'NotificationPreferenceList' });
export const UpdatePreferencesSchema = z
  .object({
    preferences: z
      .array(z.object({ event_type: EventTypeSchema, mode: PreferenceModeSchema }).strict())
      .min(1)
      .max(50)
      .superRefine((list, ctx) => {
        list.forEach((p, i) => {
          if (criticalEventTypes.has(p.event_type) && p.mode !== 'each') {
            ctx.addIssue({
              code: 'custom',
              path: [i, 'mode'],
              message: `${p.event_type} is critical: it cannot be muted or moved to the digest`,
            });
          }
        });
      }),
  })
  .strict()
  .meta({ id: 'UpdateNotificationPreferences' });

// ---------------------------------------------------------------------------------------------
// The fan-out of one event

export interface PlanInput {
  event: { type: EventType; payload: Record<string, unknown> };
  rules: {
    id: string;
    event_type: string;
    filters: Record<string, unknown>;
    channel: NotificationChannel;
    member_ids: string[];
    chat_channel_id: string | null;
    webhook_endpoint_id: string | null;
    enabled: boolean;
  }[];
  /** Enabled endpoints whose event_types take this type (empty: every type). */
  endpoints: { id: string; event_types: string[]; enabled: boolean }[];
  members: string[];
  /** member id → mode for this event type (absent: each). */
  preferences: Map<string, PreferenceMode>;
  /** Members told whatever the rules say (the owner of a disabled endpoint). */
  alwaysEmail?: string[];
}

export interface PlannedDelivery {
  channel: NotificationChannel;
  channelKey: string;
  ruleId: string | null;
  endpointId: string | null;
  memberId: string | null;
  chatChannelId: string | null;
  /** 'digest_pending' for a member who takes this type in the digest. */
  status: 'pending' | 'digest_pending';
}

export function matchesFilters(filters: Record<string, unknown>, payload: Record<string, unknown>): boolean {
  return Object.entries(filters).every(([key, value]) => value === undefined || payload[key] === value);
}

/** One delivery per distinct channel (endpoint, chat channel, member); a muted member gets none. */
export function planDeliveries(input: PlanInput): PlannedDelivery[] {
  const planned = new Map<string, PlannedDelivery>();
  const add = (d: PlannedDelivery) => {
    if (!planned.has(d.channelKey)) planned.set(d.channelKey, d);
  };
  const critical = criticalEventTypes.has(input.event.type);
  const email = (memberId: string, ruleId: string | null) => {
    const mode = critical ? 'each' : (input.preferences.get(memberId) ?? 'each');
    if (mode === 'mute') return;
    add({
      channel: 'email',
      channelKey: `email:${memberId}`,
      ruleId,
      endpointId: null,
      memberId,
      chatChannelId: null,
      status: mode === 'digest' ? 'digest_pending' : 'pending',
    });
  };
  for (const endpoint of input.endpoints) {
    if (!endpoint.enabled || (endpoint.event_types.length > 0 && !endpoint.event_types.includes(input.event.type)))
      continue;
    add({
      channel: 'webhook',
      channelKey: `webhook:${endpoint.id}`,
      ruleId: null,
      endpointId: endpoint.id,
      memberId: null,
      chatChannelId: null,
      status: 'pending',
    });
  }
  for (const rule of input.rules) {
    if (!rule.enabled || rule.event_type !== input.event.type || !matchesFilters(rule.filters, input.event.payload))
      continue;
    if (rule.channel === 'webhook' && rule.webhook_endpoint_id) {
      const endpoint = input.endpoints.find((e) => e.id === rule.webhook_endpoint_id);
      if (endpoint?.enabled)
        add({
          channel: 'webhook',
          channelKey: `webhook:${endpoint.id}`,
          ruleId: rule.id,
          endpointId: endpoint.id,
          memberId: null,
          chatChannelId: null,
          status: 'pending',
        });
    } else if (rule.channel === 'team_chat' && rule.chat_channel_id) {
      add({
        channel: 'team_chat',
        channelKey: `team_chat:${rule.chat_channel_id}`,
        ruleId: rule.id,
        endpointId: null,
        memberId: null,
        chatChannelId: rule.chat_channel_id,
        status: 'pending',
      });
    } else if (rule.channel === 'email') {
      const members =
        rule.member_ids.length > 0 ? rule.member_ids.filter((m) => input.members.includes(m)) : input.members;
      for (const m of members) email(m, rule.id);
    }
  }
  for (const m of input.alwaysEmail ?? []) email(m, null);
  return [...planned.values()];
}

/**
 * Notifications (decision 038): the event catalogue, the workspace's events, rules routing an event
 * type to a channel, and each member's preferences (mute, daily digest; the critical types cannot
 * be either).
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, queryInteger, UuidSchema } from '../../../domain/shared/common.js';
import { ApiError, notFound, valueRefusal } from '../../../domain/shared/errors.js';

import {
  criticalEventTypes,
  eventTitles,
  eventTypes,
  EventTypeSchema,
  WorkspaceEventSchema,
} from '../../../domain/notifications/events.js';
import {
  CreateRuleSchema,
  NotificationRuleListSchema,
  NotificationRuleSchema,
  PreferenceListSchema,
  rulesMax,
  UpdatePreferencesSchema,
  UpdateRuleSchema,
} from '../../../domain/notifications/rules.js';
import { listWorkspaceEvents } from '../../../store/notifications/outbox.js';
import {
  countRules,
  countWorkspaceMembers,
  deleteRule,
  findRule,
  insertRule,
  listRules,
  memberPreferences,
  ruleOut,
  setPreferences,
  updateRule,
} from '../../../store/notifications/rules.js';
import { findEndpoint } from '../../../store/notifications/webhooks.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';

const tags = ['notifications'];
const RuleParamsSchema = z.object({ rule_id: UuidSchema });
const missingRule = DetailBodySchema.describe("No rule with this id in the caller's workspace");
const noMember = DetailBodySchema.describe(
  'The credential acts for no member (an API key without one): preferences are per member',
);

const EventTypeListSchema = z
  .object({ event_types: z.array(z.object({ type: EventTypeSchema, title: z.string(), critical: z.boolean() })) })
  .meta({ id: 'NotificationEventTypeList' });
const EventListSchema = z
  .object({
    events: z.array(WorkspaceEventSchema),
    next_before: UuidSchema.nullable().describe('Pass as `before` for older events; null at the end.'),
  })
  .meta({ id: 'WorkspaceEventList' });
const EventsQuerySchema = z
  .object({
    limit: queryInteger(z.int().min(1).max(100).default(50)),
    type: EventTypeSchema.optional(),
    before: UuidSchema.optional().describe(
      'An event id from `next_before`: the events older than it (none when it names no event of the workspace).',
    ),
  })
  .strict();

export const notificationRoutes =
  ({ sql }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/notifications/event-types/',
      {
        schema: {
          operationId: 'listNotificationEventTypes',
          tags,
          summary: 'The catalogue of workspace events',
          description:
            "Every type with its title and whether it is critical (never muted or digested). Each type's payload is in the WorkspaceEvent schema.",
          response: { 200: EventTypeListSchema },
        },
      },
      async () => ({
        event_types: eventTypes.map((type) => ({
          type,
          title: eventTitles[type],
          critical: criticalEventTypes.has(type),
        })),
      }),
    );

    app.get(
      '/notifications/events/',
      {
        schema: {
          operationId: 'listWorkspaceEvents',
          tags,
          summary: "The workspace's events, newest first",
          description:
            'Each event as every channel receives it: a stable id, its type, when it occurred and its payload.',
          querystring: EventsQuerySchema,
          response: { 200: EventListSchema },
        },
      },
      async (request) => {
        const { limit, type, before } = request.query;
        const events = await listWorkspaceEvents(sql, principalOf(request).workspaceId, {
          limit: limit + 1,
          ...(type ? { type } : {}),
          ...(before ? { beforeId: before } : {}),
        });
        const page = events.slice(0, limit);
        const last = page[page.length - 1];
        return { events: page as never, next_before: events.length > limit && last ? last.id : null };
      },
    );

    app.get(
      '/notifications/rules/',
      {
        schema: {
          operationId: 'listNotificationRules',
          tags,
          summary: "The workspace's notification rules, oldest first",
          response: { 200: NotificationRuleListSchema },
        },
      },
      async (request) => ({ rules: (await listRules(sql, principalOf(request).workspaceId)).map(ruleOut) }),
    );

    app.post(
      '/notifications/rules/',
      {
        schema: {
          operationId: 'createNotificationRule',
          tags,
          summary: 'Route an event type (with optional filters) to a channel',
          description:
            '`email`: to `member_ids` (empty: every member), each by their preferences. `team_chat`: to `chat_channel_id` (delivered while the team chat is ' +
            'connected; while disconnected each delivery is recorded skipped and the rule keeps its channel). `webhook`: to `webhook_endpoint_id` even if ' +
            `the endpoint's own event_types leave the type out. At most ${rulesMax} rules (409); an endpoint or member of another workspace is 422.`,
          body: CreateRuleSchema,
          response: {
            201: NotificationRuleSchema,
            409: DetailBodySchema.describe(`The workspace already has ${rulesMax} rules`),
          },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const body = request.body;
        if (body.webhook_endpoint_id && !(await findEndpoint(sql, principal.workspaceId, body.webhook_endpoint_id))) {
          throw valueRefusal(
            ['body', 'webhook_endpoint_id'],
            'names no endpoint of this workspace',
            body.webhook_endpoint_id,
          );
        }
        if (body.member_ids?.length) {
          if (
            (await countWorkspaceMembers(sql, principal.workspaceId, body.member_ids)) !== new Set(body.member_ids).size
          )
            throw valueRefusal(
              ['body', 'member_ids'],
              'names someone who is not a member of this workspace',
              body.member_ids,
            );
        }
        if ((await countRules(sql, principal.workspaceId)) >= rulesMax)
          throw new ApiError('conflict', `A workspace has at most ${rulesMax} notification rules; delete one first.`);
        return reply
          .code(201)
          .send(ruleOut(await insertRule(sql, principal.workspaceId, body, principal.memberId ?? null)));
      },
    );

    app.get(
      '/notifications/rules/:rule_id/',
      {
        schema: {
          operationId: 'readNotificationRule',
          tags,
          summary: 'One notification rule',
          params: RuleParamsSchema,
          response: { 200: NotificationRuleSchema, 404: missingRule },
        },
      },
      async (request) => {
        const rule = await findRule(sql, principalOf(request).workspaceId, request.params.rule_id);
        if (!rule) throw notFound('Notification rule');
        return ruleOut(rule);
      },
    );

    app.patch(
      '/notifications/rules/:rule_id/',
      {
        schema: {
          operationId: 'updateNotificationRule',
          tags,
          summary: "Change a rule's filters, members, chat channel or whether it is enabled",
          description:
            "A field left out keeps its value; a field that does not belong to the rule's channel is ignored. The type and channel are fixed: make a new rule instead.",
          params: RuleParamsSchema,
          body: UpdateRuleSchema,
          response: { 200: NotificationRuleSchema, 404: missingRule },
        },
      },
      async (request) => {
        const { workspaceId } = principalOf(request);
        if (request.body.member_ids?.length) {
          if (
            (await countWorkspaceMembers(sql, workspaceId, request.body.member_ids)) !==
            new Set(request.body.member_ids).size
          )
            throw valueRefusal(
              ['body', 'member_ids'],
              'names someone who is not a member of this workspace',
              request.body.member_ids,
            );
        }
        const rule = await updateRule(sql, workspaceId, request.params.rule_id, request.body);
        if (!rule) throw notFound('Notification rule');
        return ruleOut(rule);
      },
    );

    app.delete(
      '/notifications/rules/:rule_id/',
      {
        schema: {
          operationId: 'deleteNotificationRule',
          tags,
          summary: 'Delete a notification rule',
          params: RuleParamsSchema,
          response: { 204: z.null().describe('Deleted'), 404: missingRule },
        },
      },
      async (request, reply) => {
        if (!(await deleteRule(sql, principalOf(request).workspaceId, request.params.rule_id)))
          throw notFound('Notification rule');
        return reply.code(204).send(null);
      },
    );

    app.get(
      '/notifications/preferences/',
      {
        schema: {
          operationId: 'readNotificationPreferences',
          tags,
          summary: "The caller's preference for every event type",
          description:
            '`each` (the default) sends each event as it happens; `digest` gathers it in one daily email; `mute` sends none. Critical types are always `each`.',
          response: { 200: PreferenceListSchema, 403: noMember },
        },
      },
      async (request) => {
        const { memberId } = principalOf(request);
        if (!memberId)
          throw new ApiError('forbidden', 'Preferences belong to a member; this credential acts for none.');
        const modes = await memberPreferences(sql, memberId);
        return {
          preferences: eventTypes.map((t) => ({
            event_type: t,
            mode: criticalEventTypes.has(t) ? 'each' : (modes.get(t) ?? 'each'),
            critical: criticalEventTypes.has(t),
          })),
        };
      },
    );

    app.put(
      '/notifications/preferences/',
      {
        schema: {
          operationId: 'updateNotificationPreferences',
          tags,
          summary: "Set the caller's preference for some event types",
          description:
            'Types left out keep theirs. A critical type set to `mute` or `digest` is 422 and nothing is changed.',
          body: UpdatePreferencesSchema,
          response: { 200: PreferenceListSchema, 403: noMember },
        },
      },
      async (request) => {
        const { memberId, workspaceId } = principalOf(request);
        if (!memberId)
          throw new ApiError('forbidden', 'Preferences belong to a member; this credential acts for none.');
        await setPreferences(sql, workspaceId, memberId, request.body.preferences);
        const modes = await memberPreferences(sql, memberId);
        return {
          preferences: eventTypes.map((t) => ({
            event_type: t,
            mode: criticalEventTypes.has(t) ? 'each' : (modes.get(t) ?? 'each'),
            critical: criticalEventTypes.has(t),
          })),
        };
      },
    );
  };

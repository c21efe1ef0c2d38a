/**
 * The team-chat connection (decision 039): connect with OAuth v2 (state and PKCE), the callback,
 * the state, its channels, and `DELETE /notifications/chatapp/`, which answers `{detail, count}`
 * (the interface spec's Other responses): `count` is how many notification rules route to team chat
 * and keep their channel for a reconnect.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, TimestampSchema, ValidationBodySchema, lineSchema } from '../../../domain/shared/common.js';
import {
  completeTeamChatConnect,
  disconnectTeamChat,
  listTeamChatChannels,
  startTeamChatConnect,
  teamChatStateOf,
  authorizationMinutes,
} from '../../../services/notifications/team-chat.js';
import { teamChatConnection } from '../../../store/notifications/team-chat.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';

const tags = ['notifications'];
const unconfigured = DetailBodySchema.describe(
  'The team chat is not configured here (the detail names the variables to set)',
);

const TeamChatStateSchema = z
  .object({
    connected: z.boolean(),
    team_id: z.string().nullable(),
    team_name: z.string().nullable(),
    scopes: z.array(z.string()),
    status: z
      .enum(['connected', 'reconnect_required'])
      .nullable()
      .describe(
        '`reconnect_required`: the token was revoked; deliveries are recorded skipped until someone connects again.',
      ),
    last_error: z.string().nullable(),
    connected_at: TimestampSchema.nullable(),
  })
  .meta({ id: 'TeamChatState' });
const ConnectAnswerSchema = z
  .object({ authorize_url: z.string(), expires_at: TimestampSchema })
  .meta({ id: 'TeamChatConnectAnswer' });
const CallbackQuerySchema = z.object({
  code: lineSchema(0, 512).optional(),
  state: lineSchema(0, 256).optional(),
  error: lineSchema(0, 256).optional(),
});
const CallbackAnswerSchema = z
  .object({
    detail: z.string(),
    connected: z.literal(true),
    team_name: z.string(),
    rules: z.int().min(0).describe('Team-chat rules whose channels route again'),
  })
  .meta({ id: 'TeamChatCallbackAnswer' });
const ChannelListSchema = z
  .object({
    channels: z.array(
      z.object({
        id: z.string(),
        name: z.string(),
        is_private: z.boolean(),
        is_member: z.boolean().describe('false: invite the app to the channel before routing to it'),
      }),
    ),
  })
  .meta({ id: 'TeamChatChannelList' });
const DisconnectAnswerSchema = z
  .object({
    detail: z.string(),
    count: z
      .int()
      .min(0)
      .describe(
        'How many notification rules route to team chat: each keeps its channel, so reconnecting restores routing (0 when none).',
      ),
  })
  .meta({
    id: 'TeamChatDisconnectAnswer',
    example: { detail: 'The team chat is disconnected; 1 rule keeps its channel for a reconnect.', count: 1 },
  });

export const teamChatRoutes =
  ({ sql, integrations }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/notifications/chatapp/',
      {
        schema: {
          operationId: 'readTeamChatConnection',
          tags,
          summary: "The workspace's team-chat connection (never its token)",
          response: { 200: TeamChatStateSchema },
        },
      },
      async (request) => teamChatStateOf(await teamChatConnection(sql, principalOf(request).workspaceId)),
    );

    app.post(
      '/notifications/chatapp/connect/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'connectTeamChat',
          tags,
          summary:
            'Start installing the team-chat app: answers the address to send the person to (OAuth v2 with state and PKCE S256)',
          description: `The authorization lasts ${authorizationMinutes} minutes; the team chat sends the person back to GET /notifications/chatapp/callback/, which stores the bot token encrypted.`,
          response: { 200: ConnectAnswerSchema, 503: unconfigured },
        },
      },
      async (request) => {
        const principal = principalOf(request);
        return startTeamChatConnect(sql, integrations, principal.workspaceId, principal.memberId);
      },
    );

    app.get(
      '/notifications/chatapp/callback/',
      {
        config: { access: 'public' },
        schema: {
          operationId: 'completeTeamChatConnect',
          tags,
          summary:
            "The team chat's redirect back after the install: checks the state, exchanges the code, stores the bot token encrypted",
          description:
            'Public: the state, made by POST /notifications/chatapp/connect/ and usable once, names the workspace. Rules kept from an earlier connection route again.',
          querystring: CallbackQuerySchema,
          response: {
            200: CallbackAnswerSchema,
            422: ValidationBodySchema.describe(
              'The state is missing, unknown, used or expired, the person refused, or the team chat refused the code',
            ),
            502: DetailBodySchema.describe('The team chat could not complete the exchange'),
            503: unconfigured,
          },
        },
      },
      async (request) => {
        const { row, rules } = await completeTeamChatConnect(sql, integrations, request.query);
        return {
          detail: `The team chat ${row.team_name || row.team_id} is connected; you may close this page.`,
          connected: true as const,
          team_name: row.team_name,
          rules,
        };
      },
    );

    app.get(
      '/notifications/chatapp/channels/',
      {
        schema: {
          operationId: 'listTeamChatChannels',
          tags,
          summary: 'The channels the team-chat app can see, to pick one for a rule',
          response: {
            200: ChannelListSchema,
            409: DetailBodySchema.describe('No team chat is connected, or it revoked the connection'),
            429: DetailBodySchema.describe(
              'The team chat is rate limiting the app (Retry-After says when to try again)',
            ),
            502: DetailBodySchema.describe('The team chat failed'),
            503: unconfigured,
          },
        },
      },
      async (request) => ({
        channels: await listTeamChatChannels(sql, integrations, principalOf(request).workspaceId),
      }),
    );

    app.delete(
      '/notifications/chatapp/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'disconnectTeamChat',
          tags,
          summary: 'Disconnect the team chat; rules keep their channels (spec endpoint 11)',
          description:
            'The bot token is deleted (and revoked with the team chat when it can be reached). `count` is how many notification rules route to team chat; ' +
            'each keeps its channel, so connecting again restores routing. While disconnected, a delivery to team chat is recorded `skipped` (it does not wait, ' +
            'and it never fails the rule). Works without the team chat configured; with nothing connected it answers count all the same.',
          response: { 200: DisconnectAnswerSchema },
        },
      },
      async (request) => {
        const { connected, count } = await disconnectTeamChat(sql, integrations, principalOf(request).workspaceId);
        const rules = `${count} rule${count === 1 ? '' : 's'} ${count === 1 ? 'keeps its' : 'keep their'} channel${count === 1 ? '' : 's'} for a reconnect`;
        return {
          detail: connected ? `The team chat is disconnected; ${rules}.` : `No team chat was connected; ${rules}.`,
          count,
        };
      },
    );
  };

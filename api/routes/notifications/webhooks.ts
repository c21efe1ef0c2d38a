/**
 * Outbound webhook endpoints (decision 038): CRUD, the secret shown once (at creation and
 * rotation), rotation with an overlap in which both secrets sign, every attempt listed, and replay
 * of one message or everything since a time. An endpoint sends the workspace's events out of it, so
 * every write (and every answer that shows a signing secret) is an admin's; reading the endpoints
 * (never their secrets) and their attempts is anyone's.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, queryInteger, UuidSchema, ValidationBodySchema } from '../../../domain/shared/common.js';
import { ApiError, notFound } from '../../../domain/shared/errors.js';
import {
  CreateWebhookEndpointSchema,
  DeliveryAttemptListSchema,
  endpointsMax,
  ReplayAnswerSchema,
  ReplaySchema,
  retryScheduleSeconds,
  RotateSecretSchema,
  rotationOverlapDefaultSeconds,
  UpdateWebhookEndpointSchema,
  WebhookEndpointListSchema,
  WebhookEndpointSchema,
  WebhookEndpointWithSecretSchema,
} from '../../../domain/notifications/webhooks.js';
import {
  changeEndpoint,
  createEndpoint,
  replayEndpoint,
  rotateEndpointSecret,
} from '../../../services/notifications/webhooks.js';
import { listEndpointAttempts } from '../../../store/notifications/deliveries.js';
import {
  countEndpoints,
  deleteEndpoint,
  endpointOut,
  findEndpoint,
  listEndpoints,
} from '../../../store/notifications/webhooks.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';

const tags = ['webhooks'];
const EndpointParamsSchema = z.object({ endpoint_id: UuidSchema });
const missing = DetailBodySchema.describe("No endpoint with this id in the caller's workspace");
const privateUrl = ValidationBodySchema.describe(
  'Invalid request, or a `url` at a loopback, private, link-local or metadata address (in any form, or a name resolving to one): nothing is stored',
);
const schedule = retryScheduleSeconds
  .map((s) => (s < 60 ? `${s} s` : s < 3600 ? `${s / 60} min` : `${s / 3600} h`))
  .join(', ');

const AttemptsQuerySchema = z
  .object({
    limit: queryInteger(z.int().min(1).max(100).default(50)),
    before: queryInteger(z.int().min(1).optional()).describe('An attempt id from `next_before`: older attempts.'),
    event_id: UuidSchema.optional().describe("Only this event's attempts."),
  })
  .strict();

export const webhookEndpointRoutes =
  ({ sql, temporal, integrations }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/webhooks/endpoints/',
      {
        schema: {
          operationId: 'listWebhookEndpoints',
          tags,
          summary: "The workspace's webhook endpoints, oldest first",
          description:
            'Events are POSTed as JSON (a WorkspaceEvent) and signed per Standard Webhooks: `webhook-id` (the same on every retry and replay of a message, ' +
            'so a receiver can deduplicate), `webhook-timestamp` and `webhook-signature` (`v1,<base64>` HMAC-SHA256 of `id.timestamp.body`). ' +
            `A 2xx within 15 s counts; attempts follow at ${schedule}; an endpoint failing for 5 days is disabled and its owner told by email.`,
          response: { 200: WebhookEndpointListSchema },
        },
      },
      async (request) => ({ endpoints: (await listEndpoints(sql, principalOf(request).workspaceId)).map(endpointOut) }),
    );

    app.post(
      '/webhooks/endpoints/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'createWebhookEndpoint',
          tags,
          summary: 'Add a webhook endpoint; its signing secret is shown in this answer only',
          description:
            `At most ${endpointsMax} endpoints per workspace (409 past it). \`event_types\` empty or left out: every type. ` +
            'A `url` at a loopback, private, link-local or metadata address is 422 naming `url`, and every delivery checks it again.',
          body: CreateWebhookEndpointSchema,
          response: {
            201: WebhookEndpointWithSecretSchema,
            409: DetailBodySchema.describe(`The workspace already has ${endpointsMax} endpoints`),
            422: privateUrl,
          },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        if ((await countEndpoints(sql, principal.workspaceId)) >= endpointsMax) {
          throw new ApiError(
            'conflict',
            `A workspace has at most ${endpointsMax} webhook endpoints; delete one first.`,
          );
        }
        const { endpoint, secret } = await createEndpoint(sql, integrations, {
          workspaceId: principal.workspaceId,
          url: request.body.url,
          description: request.body.description ?? '',
          eventTypes: request.body.event_types ?? [],
          enabled: request.body.enabled ?? true,
          createdBy: principal.memberId ?? null,
        });
        return reply.code(201).send({ ...endpointOut(endpoint), secret });
      },
    );

    app.get(
      '/webhooks/endpoints/:endpoint_id/',
      {
        schema: {
          operationId: 'readWebhookEndpoint',
          tags,
          summary: 'One webhook endpoint (never its secret)',
          params: EndpointParamsSchema,
          response: { 200: WebhookEndpointSchema, 404: missing },
        },
      },
      async (request) => {
        const endpoint = await findEndpoint(sql, principalOf(request).workspaceId, request.params.endpoint_id);
        if (!endpoint) throw notFound('Webhook endpoint');
        return endpointOut(endpoint);
      },
    );

    app.patch(
      '/webhooks/endpoints/:endpoint_id/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'updateWebhookEndpoint',
          tags,
          summary: 'Change an endpoint: its URL, description, event types, or enable and disable it',
          description:
            'A field left out keeps its value. Enabling an endpoint the service disabled clears its failing time and reason. ' +
            'A new `url` is checked as at creation (422 naming `url`, nothing changed).',
          params: EndpointParamsSchema,
          body: UpdateWebhookEndpointSchema,
          response: { 200: WebhookEndpointSchema, 404: missing, 422: privateUrl },
        },
      },
      async (request) => {
        const endpoint = await changeEndpoint(
          sql,
          integrations,
          principalOf(request).workspaceId,
          request.params.endpoint_id,
          request.body,
        );
        if (!endpoint) throw notFound('Webhook endpoint');
        return endpointOut(endpoint);
      },
    );

    app.delete(
      '/webhooks/endpoints/:endpoint_id/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'deleteWebhookEndpoint',
          tags,
          summary: 'Delete a webhook endpoint, its deliveries, attempts and the rules that name it',
          params: EndpointParamsSchema,
          response: { 204: z.null().describe('Deleted'), 404: missing },
        },
      },
      async (request, reply) => {
        if (!(await deleteEndpoint(sql, principalOf(request).workspaceId, request.params.endpoint_id)))
          throw notFound('Webhook endpoint');
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/webhooks/endpoints/:endpoint_id/rotate-secret/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'rotateWebhookSecret',
          tags,
          summary:
            'Make a new signing secret (shown in this answer only); the previous one keeps signing during the overlap',
          description:
            `During the overlap (default ${rotationOverlapDefaultSeconds} s) every message carries two \`v1,\` signatures, one per secret, so the receiver ` +
            'can switch at its own pace. A second rotation within the overlap drops the oldest secret.',
          params: EndpointParamsSchema,
          body: RotateSecretSchema,
          response: { 200: WebhookEndpointWithSecretSchema, 404: missing },
        },
      },
      async (request) => {
        const rotated = await rotateEndpointSecret(
          sql,
          integrations,
          principalOf(request).workspaceId,
          request.params.endpoint_id,
          request.body.overlap_seconds ?? rotationOverlapDefaultSeconds,
        );
        if (!rotated) throw notFound('Webhook endpoint');
        return { ...endpointOut(rotated.endpoint), secret: rotated.secret };
      },
    );

    app.get(
      '/webhooks/endpoints/:endpoint_id/attempts/',
      {
        schema: {
          operationId: 'listWebhookAttempts',
          tags,
          summary:
            "Every delivery attempt to the endpoint, newest first: status code, time, outcome and the response's first 1,000 characters",
          params: EndpointParamsSchema,
          querystring: AttemptsQuerySchema,
          response: { 200: DeliveryAttemptListSchema, 404: missing },
        },
      },
      async (request) => {
        const endpoint = await findEndpoint(sql, principalOf(request).workspaceId, request.params.endpoint_id);
        if (!endpoint) throw notFound('Webhook endpoint');
        const { limit, before, event_id } = request.query;
        return listEndpointAttempts(sql, endpoint.id, {
          limit,
          ...(before !== undefined ? { before } : {}),
          ...(event_id ? { eventId: event_id } : {}),
        });
      },
    );

    app.post(
      '/webhooks/endpoints/:endpoint_id/replay/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'replayWebhookMessages',
          tags,
          summary: 'Send one message again, or every message of the endpoint since a time',
          description:
            'Give `event_id` (one message) or `since` (every event of a type the endpoint takes, at or after that time, at most 1,000). ' +
            'Each is delivered again with the same `webhook-id` on the full retry schedule; its attempts are listed with trigger `replay`. ' +
            'A disabled endpoint is 409: enable it first.',
          params: EndpointParamsSchema,
          body: ReplaySchema,
          response: {
            202: ReplayAnswerSchema,
            404: DetailBodySchema.describe("No endpoint (or event) with this id in the caller's workspace"),
            409: DetailBodySchema.describe('The endpoint is disabled'),
          },
        },
      },
      async (request, reply) => {
        const endpoint = await findEndpoint(sql, principalOf(request).workspaceId, request.params.endpoint_id);
        if (!endpoint) throw notFound('Webhook endpoint');
        if (!endpoint.enabled)
          throw new ApiError('conflict', 'The endpoint is disabled; enable it (PATCH enabled true) before replaying.');
        const replayed = await replayEndpoint(sql, temporal, endpoint, {
          ...(request.body.event_id ? { eventId: request.body.event_id } : {}),
          ...(request.body.since ? { since: new Date(request.body.since) } : {}),
        });
        return reply.code(202).send({ replayed });
      },
    );
  };

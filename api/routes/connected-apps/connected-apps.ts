/**
 * Connected AI apps (interface spec: Connected AI apps): the workspace's apps (list, revoke) and the
 * consent step's JSON routes (read a consent request, approve, deny), which the consent page uses
 * and an API client can drive the same way. Consent is a person's: it takes a signed-in member (a
 * bearer token), not an API key.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import { notFound } from '../../../domain/shared/errors.js';
import { requireAdmin } from '../../../domain/platform/roles.js';
import {
  ConnectedAppListSchema,
  ConsentApproveSchema,
  ConsentRedirectSchema,
  ConsentRequestSchema,
} from '../../../domain/connected-apps/connected-apps.js';
import { approveConsent, denyConsent, readConsentRequest } from '../../../services/connected-apps/authorization.js';
import { findApp, listApps, revokeApp } from '../../../store/connected-apps/oauth.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { endpointsOf } from '../../oauth-http.js';
import { consentPersonOf } from '../../request-actor.js';

const tags = ['connected-apps'];
const AppParamsSchema = z.object({ app_id: UuidSchema });
const ConsentParamsSchema = z.object({ request_id: UuidSchema });
const decided = DetailBodySchema.describe(
  'You already approved or denied this consent request, or it expired (10 minutes). Decided by someone else, it is not found',
);

export const connectedAppRoutes =
  ({ sql, integrations }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/connected-apps/',
      {
        schema: {
          operationId: 'listConnectedApps',
          tags,
          summary: "The workspace's connected AI apps, newest first",
          response: { 200: ConnectedAppListSchema },
        },
      },
      async (request) => ({ data: await listApps(sql, principalOf(request).workspaceId) }),
    );

    app.delete(
      '/connected-apps/:app_id/',
      {
        // A member disconnects their own apps; another member's is an admin's to disconnect.
        config: { adminOnly: "when the app is another member's" },
        schema: {
          operationId: 'revokeConnectedApp',
          tags,
          summary: 'Disconnect an AI app: its tokens stop working at once',
          description: 'The member who connected it, or an admin, may disconnect it.',
          params: AppParamsSchema,
          response: { 204: z.null().describe('Disconnected') },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const found = await findApp(sql, principal.workspaceId, request.params.app_id);
        if (!found) throw notFound('Connected app');
        if (found.member_id !== principal.memberId) requireAdmin(principal);
        if (!(await revokeApp(sql, principal.workspaceId, found.id, principal.memberId)))
          throw notFound('Connected app');
        return reply.code(204).send(null);
      },
    );

    app.get(
      '/connected-apps/consent-requests/:request_id/',
      {
        schema: {
          operationId: 'readConsentRequest',
          tags,
          summary:
            'What an app asks for: its name, brand, whether it is recognised, where the code goes, and your workspaces',
          params: ConsentParamsSchema,
          response: { 200: ConsentRequestSchema, 409: decided },
        },
      },
      async (request) =>
        readConsentRequest(
          sql,
          request.params.request_id,
          await consentPersonOf(sql, request, request.params.request_id),
        ),
    );

    app.post(
      '/connected-apps/consent-requests/:request_id/approve/',
      {
        schema: {
          operationId: 'approveConsentRequest',
          tags,
          summary: 'Approve: connect the app to one of your workspaces with read or write access',
          description:
            "Answers the address to send the browser to: the app's redirect with a one-time code (valid one minute) and its state. " +
            'A workspace that is not one of yours is 404. `write` in a workspace not on the paid plan is kept, and reads as `read` until the plan is paid.',
          params: ConsentParamsSchema,
          body: ConsentApproveSchema,
          response: { 200: ConsentRedirectSchema, 409: decided },
        },
      },
      async (request) =>
        approveConsent(
          sql,
          request.params.request_id,
          await consentPersonOf(sql, request, request.params.request_id),
          request.body,
          endpointsOf(integrations.publicBaseUrl, request),
        ),
    );

    app.post(
      '/connected-apps/consent-requests/:request_id/deny/',
      {
        schema: {
          operationId: 'denyConsentRequest',
          tags,
          summary: "Deny: answers the app's redirect with error=access_denied",
          params: ConsentParamsSchema,
          response: { 200: ConsentRedirectSchema, 409: decided },
        },
      },
      async (request) =>
        denyConsent(
          sql,
          request.params.request_id,
          await consentPersonOf(sql, request, request.params.request_id),
          endpointsOf(integrations.publicBaseUrl, request),
        ),
    );
  };

/**
 * The cloud-drive connection (decision 036): its state, connect (authorization code with PKCE), the
 * drive's redirect back (public: the person's browser arrives without our credentials; the state is
 * the credential), and disconnect. Paths are ours. No answer carries a token.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema } from '../../../domain/shared/common.js';
import {
  CloudDriveCallbackAnswerSchema,
  CloudDriveCallbackQuerySchema,
  CloudDriveConnectAnswerSchema,
  CloudDriveStateSchema,
} from '../../../domain/cloud-drive/cloud-drive.js';
import {
  cloudDriveClientOf,
  cloudDriveState,
  completeCloudDriveConnect,
  disconnectCloudDrive,
  startCloudDriveConnect,
} from '../../../services/cloud-drive/drive.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';

const tags = ['cloud-drive'];
const unconfigured = DetailBodySchema.describe(
  'The cloud drive is not configured on this service; the detail names the variables to set',
);

export const cloudDriveRoutes =
  ({ sql, integrations }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/cloud-drive/',
      {
        schema: {
          operationId: 'readCloudDrive',
          tags,
          summary:
            "The workspace's cloud-drive connection: the account, when, its status and last error (never its tokens)",
          response: { 200: CloudDriveStateSchema, 503: unconfigured },
        },
      },
      async (request) => {
        cloudDriveClientOf(integrations);
        return cloudDriveState(sql, principalOf(request).workspaceId);
      },
    );

    app.post(
      '/cloud-drive/connect/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'connectCloudDrive',
          tags,
          summary:
            'Start connecting a drive account: answers the address to send the person to (OAuth 2.0 with PKCE S256)',
          description:
            'The authorization lasts 10 minutes. The drive sends the person back to `GET /cloud-drive/callback/`, which stores the tokens ' +
            'encrypted and replaces any earlier connection of the workspace.',
          response: { 200: CloudDriveConnectAnswerSchema, 503: unconfigured },
        },
      },
      async (request) => {
        const principal = principalOf(request);
        return startCloudDriveConnect(sql, integrations, principal.workspaceId, principal.memberId);
      },
    );

    app.get(
      '/cloud-drive/callback/',
      {
        config: { access: 'public' },
        schema: {
          operationId: 'completeCloudDriveConnect',
          tags,
          summary:
            "The drive's redirect back after consent: checks the state, exchanges the code, stores the tokens encrypted",
          description:
            'Public: the state, made by `POST /cloud-drive/connect/` and usable once within 10 minutes, names the workspace.',
          querystring: CloudDriveCallbackQuerySchema,
          response: {
            200: CloudDriveCallbackAnswerSchema,
            422: DetailBodySchema.describe(
              'The state is missing, unknown, used or expired, the person refused, or the drive refused the code',
            ),
            502: DetailBodySchema.describe('The drive could not complete the exchange'),
            503: unconfigured,
          },
        },
      },
      async (request) => {
        const { accountEmail } = await completeCloudDriveConnect(sql, integrations, request.query);
        return {
          detail: `The cloud drive${accountEmail ? ` of ${accountEmail}` : ''} is connected; you may close this page.`,
          connected: true as const,
          account_email: accountEmail,
        };
      },
    );

    app.delete(
      '/cloud-drive/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'disconnectCloudDrive',
          tags,
          summary: 'Disconnect the drive: its stored tokens are deleted (works without the drive configured)',
          response: { 200: DetailBodySchema },
        },
      },
      async (request) => {
        const removed = await disconnectCloudDrive(sql, principalOf(request).workspaceId);
        return {
          detail: removed ? 'The cloud drive is disconnected and its tokens deleted.' : 'No cloud drive was connected.',
        };
      },
    );
  };

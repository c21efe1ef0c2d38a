/**
 * Admins inviting teammates by email, and the invited person accepting with the emailed token
 * (services/platform/invitations.ts; docs/teams.md).
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import {
  InvitationAcceptedSchema,
  InvitationAcceptSchema,
  InvitationListQuerySchema,
  MemberInvitationCreateSchema,
  MemberInvitationPageSchema,
  MemberInvitationSchema,
} from '../../../domain/platform/invitations.js';
import {
  acceptInvitation,
  inviteMember,
  listInvitations,
  revokeInvitation,
} from '../../../services/platform/invitations.js';
import type { AppDeps } from '../../deps.js';
import { identityOf, principalOf } from '../../plugins/auth.js';

export const invitationRoutes =
  ({ sql, integrations }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/workspace/invitations/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'inviteMember',
          tags: ['workspace'],
          summary: 'Invite a person by email (admins)',
          description:
            'Emails `email` an invitation to join the workspace with `role` (`member` unless said), ' +
            'valid for `expires_in_days` (1 to 30, 7 unless said) and usable once. The email carries ' +
            'the token, which only it ever shows: the person signs in with that address, verified, ' +
            'and sends it to `POST /invitations/accept/` (operationId acceptInvitation). A pending ' +
            'invitation of the same address is revoked and replaced by this one (its token stops ' +
            'working; `member.invitation_revoked`). An address of a member already is a 409. The ' +
            'email is sent before the invitation is stored: a mail server that does not take it ' +
            'answers 502 and nothing is stored; with no mail server configured (SMTP_URL) the answer ' +
            'is 503. Records `member.invited`.',
          body: MemberInvitationCreateSchema,
          response: {
            201: MemberInvitationSchema,
            409: DetailBodySchema.describe('The address is a member’s already'),
            502: DetailBodySchema.describe('The mail server did not take the invitation email; nothing was stored'),
            503: DetailBodySchema.describe('No mail server is configured (SMTP_URL); nothing was stored'),
          },
        },
      },
      async (request, reply) => {
        const invitation = await inviteMember(
          {
            sql,
            // Read at each request: the caller's own mailer first, else the shared one, which a test (or a
            // reload) may replace after the app is built.
            mailer: integrations.mailer,
            acceptPage: integrations.invitationAcceptUrl,
          },
          principalOf(request),
          request.body,
        );
        return reply.code(201).send(invitation);
      },
    );

    app.get(
      '/workspace/invitations/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'listInvitations',
          tags: ['workspace'],
          summary: 'The workspace’s invitations (admins)',
          description:
            'Every invitation with its `status`: `pending` ones first, then accepted, revoked (or ' +
            'replaced) and expired ones, newest first within each. Tokens are never shown. `limit` ' +
            '1 to 200 (50), `offset`; `next_offset` is null on the last page.',
          querystring: InvitationListQuerySchema,
          response: { 200: MemberInvitationPageSchema },
        },
      },
      async (request) => listInvitations(sql, principalOf(request).workspaceId, request.query),
    );

    app.delete(
      '/workspace/invitations/:invitation_id/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'revokeInvitation',
          tags: ['workspace'],
          summary: 'Revoke a pending invitation (admins)',
          description:
            'Its token stops working at once. Only a pending invitation can be revoked: an accepted, ' +
            'revoked or expired one is a 409. Records `member.invitation_revoked`.',
          params: z.object({ invitation_id: UuidSchema }),
          response: {
            204: z.null().describe('Revoked'),
            409: DetailBodySchema.describe('The invitation is not pending'),
          },
        },
      },
      async (request, reply) => {
        await revokeInvitation(sql, principalOf(request), request.params.invitation_id);
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/invitations/accept/',
      {
        config: { access: 'identity' },
        schema: {
          operationId: 'acceptInvitation',
          tags: ['workspace'],
          summary: 'Accept an invitation (a bearer token of the identity provider)',
          description:
            'Makes the signed-in person a member of the inviting workspace with the invitation’s ' +
            'role, and answers the workspace and the new member; their token then reaches it (name ' +
            'it in X-Workspace-Id when they are a member of several). The token’s email must be the ' +
            'invited address and verified (`email_verified`), else 403 saying which. An invitation ' +
            'works once and before `expires_at`: accepted, revoked, replaced or expired is a 409, ' +
            'as is a person who is a member already; an unknown token is a 404. A person removed ' +
            'from the workspace before may accept a new invitation. Takes only a bearer token: an ' +
            'API key stands for no person (403).',
          body: InvitationAcceptSchema,
          response: {
            200: InvitationAcceptedSchema,
            404: DetailBodySchema.describe('No invitation has this token'),
            409: DetailBodySchema.describe('Accepted, revoked, replaced or expired; or a member already'),
          },
        },
      },
      async (request) => acceptInvitation(sql, identityOf(request), request.body.token),
    );
  };

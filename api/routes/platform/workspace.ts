/** The caller's workspace, its members and its credits. */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { getBalance, listMovements } from '../../../store/platform/credits.js';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import {
  CreditBalanceSchema,
  CreditLedgerPageSchema,
  CreditLedgerQuerySchema,
} from '../../../domain/platform/credits.js';
import { notFound } from '../../../domain/shared/errors.js';
import {
  MemberAuditPageSchema,
  MemberAuditQuerySchema,
  MemberRoleUpdateSchema,
} from '../../../domain/platform/members.js';
import { changeMember } from '../../../services/platform/members.js';
import { listMemberAudit } from '../../../store/platform/members.js';
import { CallerSchema, MemberListSchema, MemberSchema } from '../../../domain/platform/workspaces.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { getMember, getWorkspace, listMembers } from '../../../store/platform/workspaces.js';

export const workspaceRoutes =
  ({ sql }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/workspace/',
      {
        schema: {
          operationId: 'readCaller',
          tags: ['workspace'],
          summary: 'The workspace and member behind this credential',
          response: { 200: CallerSchema },
        },
      },
      async (request) => {
        const p = principalOf(request);
        const workspace = await getWorkspace(sql, p.workspaceId);
        if (!workspace) throw notFound('Workspace');
        const member = p.memberId ? ((await getMember(sql, p.workspaceId, p.memberId)) ?? null) : null;
        return { workspace, member, via: p.via, scope: p.scope };
      },
    );

    app.get(
      '/workspace/members/',
      {
        schema: {
          operationId: 'listMembers',
          tags: ['workspace'],
          summary: 'The members of the workspace',
          response: { 200: MemberListSchema },
        },
      },
      async (request) => ({ members: await listMembers(sql, principalOf(request).workspaceId) }),
    );

    app.get(
      '/workspace/members/:member_id/',
      {
        schema: {
          operationId: 'readMember',
          tags: ['workspace'],
          summary: 'One member',
          params: z.object({ member_id: UuidSchema }),
          response: { 200: MemberSchema },
        },
      },
      async (request) => {
        const member = await getMember(sql, principalOf(request).workspaceId, request.params.member_id);
        if (!member) throw notFound('Member');
        return member;
      },
    );

    app.patch(
      '/workspace/members/:member_id/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'updateMemberRole',
          tags: ['workspace'],
          summary: 'Change a member’s role (admins)',
          description:
            'Makes the member an `admin` or a `member`. The role they already have changes nothing. ' +
            'The last admin cannot be made a member (409): make another member an admin first. ' +
            'The change is in the audit (`GET /workspace/audit/`) and records `member.role_changed`.',
          params: z.object({ member_id: UuidSchema }),
          body: MemberRoleUpdateSchema,
          response: { 200: MemberSchema, 409: DetailBodySchema.describe('The member is the last admin') },
        },
      },
      async (request) => {
        const p = principalOf(request);
        const member = await changeMember(sql, p, {
          kind: 'role',
          memberId: request.params.member_id,
          role: request.body.role,
        });
        if (!member) throw notFound('Member');
        return member;
      },
    );

    app.delete(
      '/workspace/members/:member_id/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'removeMember',
          tags: ['workspace'],
          summary: 'Remove a member (admins)',
          description:
            'Removes the member at once: their bearer tokens stop authenticating (403), the API keys ' +
            'they created are revoked, and the AI apps they connected lose their tokens. The last ' +
            'admin cannot be removed (409). The removal is kept per identity-provider user, so ' +
            'signing in again does not make them a member; an operator can add them back. It is in ' +
            'the audit and records `member.removed`.',
          params: z.object({ member_id: UuidSchema }),
          response: {
            204: z.null().describe('Removed'),
            409: DetailBodySchema.describe('The member is the last admin'),
          },
        },
      },
      async (request, reply) => {
        await changeMember(sql, principalOf(request), { kind: 'remove', memberId: request.params.member_id });
        return reply.code(204).send(null);
      },
    );

    app.get(
      '/workspace/audit/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'listMemberAudit',
          tags: ['workspace'],
          summary: 'Who changed which member, and how (admins)',
          description:
            'Role changes and removals of members, newest first: the admin who acted, the member ' +
            'changed, and the role before and after (null after a removal). `limit` 1 to 200 ' +
            '(50), `offset`; `next_offset` is null on the last page.',
          querystring: MemberAuditQuerySchema,
          response: { 200: MemberAuditPageSchema },
        },
      },
      async (request) => listMemberAudit(sql, principalOf(request).workspaceId, request.query),
    );

    app.get(
      '/credits/',
      {
        schema: {
          operationId: 'readCreditBalance',
          tags: ['credits'],
          summary: 'The credit balance',
          response: { 200: CreditBalanceSchema },
        },
      },
      async (request) => getBalance(sql, principalOf(request).workspaceId),
    );

    app.get(
      '/credits/ledger/',
      {
        schema: {
          operationId: 'listCreditMovements',
          tags: ['credits'],
          summary: 'Credit movements, newest first',
          querystring: CreditLedgerQuerySchema,
          response: { 200: CreditLedgerPageSchema },
        },
      },
      async (request) =>
        listMovements(sql, principalOf(request).workspaceId, request.query.limit, request.query.before_id),
    );
  };

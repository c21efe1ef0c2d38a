/** The caller's workspace, its members and its credits. */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { getBalance, listMovements } from '../../../store/platform/credits.js';
import { UuidSchema } from '../../../domain/shared/common.js';
import {
  CreditBalanceSchema,
  CreditLedgerPageSchema,
  CreditLedgerQuerySchema,
} from '../../../domain/platform/credits.js';
import { notFound } from '../../../domain/shared/errors.js';
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

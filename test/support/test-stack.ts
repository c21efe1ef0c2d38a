/**
 * The real service for one test file: its own database, a real worker on its own task queue,
 * the real app (driven with app.inject) and helpers to provision workspaces as an operator would.
 */
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, inject } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { createEnrichmentProviders, type EnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import { agentSuppliersFrom, type AgentSuppliers } from '../../integrations/agent-tools/index.js';
import type { ChatModel } from '../../integrations/chat-model.js';
import { startStepWorkflow } from '../../services/pnet/browser-step-client.js';
import { grantWorkspaceCredits } from '../../worker/provisioning.js';
import { buildApp } from '../../api/app.js';
import { createTokenVerifier, mintAccessToken, type DevelopmentClaims } from '../../services/platform/tokens.js';
import type { Sql } from '../../db/sql.js';
import type { Plan, Role } from '../../domain/shared/common.js';
import { resolveTokenConfig, signingSecret } from '../../worker/auth-config.js';
import { addWorkspaceMember, createWorkspaceWithAdmin } from '../../worker/provisioning.js';
import { createTestDatabase } from './database.js';
import type { Integrations } from '../../integrations/config.js';
import { testIntegrations } from './integrations.js';

Runtime.install({ logger: new DefaultLogger('WARN') });

export interface TestWorkspace {
  workspaceId: string;
  userId: string;
  apiKey: string;
  accessToken: string;
}

export interface TestStack {
  app: FastifyInstance;
  sql: Sql;
  databaseUrl: string;
  client: Client;
  taskQueue: string;
  /** The API's outside services and settings, read from the environment when the stack started; a test may change a setting on it. */
  integrations: Integrations;
  createWorkspace: (plan?: Plan) => Promise<TestWorkspace>;
  addMember: (workspaceId: string, role: Role) => Promise<{ userId: string; accessToken: string }>;
  mintToken: (claims: DevelopmentClaims) => Promise<string>;
  close: () => Promise<void>;
}

export interface TestStackOptions {
  rateLimit?: number;
  /** Add routes (for example a route that throws) before the app is made ready. */
  extendApp?: (app: FastifyInstance) => void;
  /** The enrichment providers of the API and the worker; from an empty environment (no AI column) when omitted, never process.env. */
  enrichmentProviders?: () => EnrichmentProviders;
  /** What saved agents run on, for the API and the worker; from an empty environment (no chat model, no suppliers) when omitted. */
  agentSuppliers?: () => AgentSuppliers;
  /** The chat model of the API and the worker (the outbound agent, training sessions, the inbox, the assistant); none (the local template writer) when omitted, never process.env. */
  chatModel?: () => ChatModel | null;
  /** The API's clock (rate limits, the once-a-minute last_used_at write); Date.now when omitted. */
  now?: () => number;
}

export async function startTestStack(options: TestStackOptions = {}): Promise<TestStack> {
  const db = await createTestDatabase();
  const taskQueue = `test-${randomBytes(4).toString('hex')}`;
  const address = inject('temporalAddress');
  const nativeConnection = await NativeConnection.connect({ address });
  const connection = await Connection.connect({ address });
  const client = new Client({ connection });
  // One set of outside services for the API and the worker, as the bootstrap builds it: a test that
  // sets `stack.integrations.chatModel` gives the assistant's routes and its turns the same model.
  const integrations = testIntegrations({
    enrichmentProviders: options.enrichmentProviders?.() ?? createEnrichmentProviders({ env: {} }),
    agentSuppliers: options.agentSuppliers?.() ?? agentSuppliersFrom({}),
    chatModel: options.chatModel?.() ?? null,
    // Tests' IMAP servers listen on 127.0.0.1.
    mailboxNetwork: { allowPrivateNetworks: true },
  });
  const worker = await Worker.create({
    connection: nativeConnection,
    taskQueue,
    workflowBundle: { codePath: inject('workflowBundlePath') },
    // Tests drive each account's line by hand: no housekeeping reads of its own.
    activities: createActivities({
      sql: db.sql,
      integrations,
      startStep: (row) => startStepWorkflow({ client, taskQueue, sql: db.sql }, row),
      housekeeping: {},
    }),
  });
  const running = worker.run();
  // As `npm start` runs it: the API's client shares the worker's native connection and starts a
  // step's workflow eagerly (its first task handed to this worker with the start's answer).
  const app = await buildApp({
    integrations,
    sql: db.sql,
    temporal: { client: new Client({ connection: nativeConnection }), taskQueue, eagerStart: true },
    verifyToken: createTokenVerifier(await resolveTokenConfig(db.sql, {})),
    rateLimit: { limit: options.rateLimit ?? 0, windowSeconds: 60, ...(options.now ? { now: options.now } : {}) },
  });
  options.extendApp?.(app);
  await app.ready();
  const secret = (await signingSecret(db.sql, {}))!;
  return {
    app,
    integrations,
    sql: db.sql,
    databaseUrl: db.url,
    client,
    taskQueue,
    async createWorkspace(plan = 'paid') {
      const created = await createWorkspaceWithAdmin(db.sql, {
        name: `Workspace ${randomBytes(3).toString('hex')}`,
        plan,
      });
      return {
        workspaceId: created.workspace_id,
        userId: created.user_id,
        apiKey: created.api_key,
        accessToken: created.access_token!,
      };
    },
    async addMember(workspaceId, role) {
      const email = `${role}-${randomBytes(3).toString('hex')}@example.com`;
      const added = await addWorkspaceMember(db.sql, { workspaceId, email, role });
      return { userId: added.user_id, accessToken: added.access_token! };
    },
    mintToken: (claims) => mintAccessToken(secret, claims),
    async close() {
      await app.close();
      worker.shutdown();
      await running;
      await nativeConnection.close();
      await connection.close();
      await db.drop();
    },
  };
}

export const withKey = (apiKey: string) => ({ 'x-api-key': apiKey });
export const withToken = (token: string) => ({ authorization: `Bearer ${token}` });

/**
 * The file's stack, started before its tests (beforeAll) and closed after them (afterAll), with
 * one paid and one free workspace (credits granted) unless `workspaces: false`. The objects
 * answered are filled in beforeAll: read their fields inside hooks and tests, never at import.
 */
export function useTestStack(options: TestStackOptions & { workspaces: false }): { stack: TestStack };
export function useTestStack(options?: TestStackOptions & { workspaces?: true }): {
  stack: TestStack;
  paid: TestWorkspace;
  free: TestWorkspace;
};
export function useTestStack({ workspaces = true, ...options }: TestStackOptions & { workspaces?: boolean } = {}) {
  const stack = {} as TestStack;
  const paid = {} as TestWorkspace;
  const free = {} as TestWorkspace;
  beforeAll(async () => {
    Object.assign(stack, await startTestStack(options));
    if (!workspaces) return;
    Object.assign(paid, await stack.createWorkspace('paid'));
    Object.assign(free, await stack.createWorkspace('free'));
    // Enough for every priced step a test queues; credit tests make workspaces of their own.
    for (const ws of [paid, free]) {
      await grantWorkspaceCredits(stack.sql, {
        workspaceId: ws.workspaceId,
        amount: 100_000,
        causeKey: 'test-fixture',
      });
    }
  });
  afterAll(() => stack.close?.());
  return workspaces ? { stack, paid, free } : { stack };
}

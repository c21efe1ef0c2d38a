/**
 * The extension protocol, authenticated by the sender account's connection token (in
 * `Authorization: Bearer` or `X-API-Key`). The spec leaves these paths open; they live beside
 * endpoint 2 under /pnet/agent/.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { AgentHeartbeatSchema, AgentSetStateSchema, AgentStateSchema } from '../../domain/pnet.js';
import type { AppDeps } from '../deps.js';
import { principalOf } from '../plugins/auth.js';
import { checkIn } from '../pnet-agent-store.js';

const tags = ['pnet-agent'];
const config = { access: 'extension' as const };

export const pnetAgentRoutes =
  ({ sql }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/pnet/agent/heartbeat/',
      {
        config,
        schema: {
          operationId: 'agentHeartbeat',
          tags,
          summary: "A browser's check-in: presence, identity, lease; answers the authoritative agent state",
          description:
            'The first check-in naming an identity connects the account; another identity afterwards reads `account_mismatch: true` (a hard stop). ' +
            'With a `lease_nonce`, `lease_granted` says whether this browser holds the lease, which lapses when its holder stops checking in.',
          body: AgentHeartbeatSchema,
          response: { 200: AgentStateSchema },
        },
      },
      async (request) => {
        const b = request.body;
        return checkIn(sql, principalOf(request).accountId!, {
          browserId: b.browser_id,
          label: b.browser_label,
          version: b.extension_version,
          leaseNonce: b.lease_nonce,
          identity: b.identity,
          running: b.running,
        });
      },
    );

    app.post(
      '/pnet/agent/state/',
      {
        config,
        schema: {
          operationId: 'agentSetState',
          tags,
          summary: 'Set the run mode from the extension and take or renew the lease',
          body: AgentSetStateSchema,
          response: { 200: AgentStateSchema },
        },
      },
      async (request) => {
        const [session] = await sql<{ browser_label: string; extension_version: string }[]>`
          select browser_label, extension_version from pnet_sessions
          where account_id = ${principalOf(request).accountId!} and browser_id = ${request.body.browser_id}`;
        return checkIn(sql, principalOf(request).accountId!, {
          browserId: request.body.browser_id,
          label: session?.browser_label ?? 'Browser',
          version: session?.extension_version ?? '0',
          leaseNonce: request.body.lease_nonce,
          runMode: request.body.run_mode,
        });
      },
    );
  };

import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { AppDeps } from '../../deps.js';
import { pingDatabase } from '../../../store/platform/health.js';
import { probe } from '../../health-probe.js';

const ComponentSchema = z.object({ ok: z.boolean(), latency_ms: z.number(), detail: z.string().nullable() });
const HealthSchema = z
  .object({ status: z.enum(['ok', 'degraded']), postgres: ComponentSchema, temporal: ComponentSchema })
  .meta({ id: 'Health' });
const UnhealthySchema = HealthSchema.extend({ detail: z.string() }).meta({ id: 'Unhealthy' });
const PostgresHealthSchema = z.object({ postgres: z.literal('ok') }).meta({ id: 'PostgresHealth' });

/** Reports Postgres and Temporal separately; 503 when either is down, so a balancer can act. */
export const healthRoutes =
  (deps: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/health/',
      {
        config: { access: 'public' },
        schema: {
          operationId: 'getHealth',
          tags: ['platform'],
          summary: 'Health of the API and its dependencies',
          response: { 200: HealthSchema, 503: UnhealthySchema },
        },
      },
      async (_request, reply) => {
        const [postgres, temporal] = await Promise.all([
          probe(() => pingDatabase(deps.sql)),
          probe(() => deps.temporal.client.workflowService.getSystemInfo({})),
        ]);
        if (postgres.ok && temporal.ok) return { status: 'ok' as const, postgres, temporal };
        const down = [!postgres.ok && 'Postgres', !temporal.ok && 'Temporal'].filter(Boolean).join(' and ');
        return reply
          .code(503)
          .send({ status: 'degraded' as const, postgres, temporal, detail: `${down} unreachable.` });
      },
    );

    // Exactly one Postgres round trip and nothing else: a balancer's probe of this process, and
    // the baseline the pnet benchmark compares the heartbeat with.
    app.get(
      '/health/postgres/',
      {
        config: { access: 'public' },
        schema: {
          operationId: 'getPostgresHealth',
          tags: ['platform'],
          summary: 'Whether this API process reaches Postgres (one `select 1`)',
          description: 'Answers 503 when Postgres is unreachable; says nothing about Temporal.',
          response: { 200: PostgresHealthSchema },
        },
      },
      async () => {
        await pingDatabase(deps.sql);
        return { postgres: 'ok' as const };
      },
    );
  };

/** Subdomain discovery (decision 042): start one for a domain or a table column's domains; read it. */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import { SubdomainDiscoveryCreateSchema, SubdomainDiscoverySchema } from '../../../domain/sourcing/subdomains.js';
import { createSubdomainDiscovery, discoveryNotFound } from '../../../services/sourcing/subdomains.js';
import { getDiscovery, toDiscovery } from '../../../store/sourcing/subdomains.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';

const tags = ['sourcing'];

export const subdomainRoutes =
  ({ sql, temporal }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/subdomain-discoveries/',
      {
        schema: {
          operationId: 'createSubdomainDiscovery',
          tags,
          summary:
            "Find a company domain's subdomains in certificate-transparency logs, keep those that answer in DNS, one row each",
          description:
            'For one `domain`, or the domains in a table column (`source_table_id` + `source_column_id`, at most 1,000 distinct domains). ' +
            'Each name is confirmed by DNS (A, AAAA or CNAME); a row holds the subdomain, its domain and what answered. A busy CT log (429, 502, timeouts) is retried with back-off; a domain it never answers for is recorded with the error. ' +
            'The rows land in `table_id`, or a new table; a subdomain the table has is not added again.',
          body: SubdomainDiscoveryCreateSchema,
          response: {
            202: SubdomainDiscoverySchema,
            404: DetailBodySchema.describe("No table with this id in the caller's workspace"),
            409: DetailBodySchema.describe('A column of the table with one of the names filled is computed'),
          },
        },
      },
      async (request, reply) =>
        reply
          .code(202)
          .send(toDiscovery(await createSubdomainDiscovery(sql, temporal, principalOf(request), request.body))),
    );

    app.get(
      '/subdomain-discoveries/:discovery_id/',
      {
        schema: {
          operationId: 'getSubdomainDiscovery',
          tags,
          summary: 'A subdomain discovery with its progress',
          params: z.object({ discovery_id: UuidSchema }),
          response: {
            200: SubdomainDiscoverySchema,
            404: DetailBodySchema.describe("No subdomain discovery with this id in the caller's workspace"),
          },
        },
      },
      async (request) => {
        const d = await getDiscovery(sql, principalOf(request).workspaceId, request.params.discovery_id);
        if (!d) throw discoveryNotFound();
        return toDiscovery(d);
      },
    );
  };

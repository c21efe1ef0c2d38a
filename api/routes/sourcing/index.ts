/**
 * Data sourcing's routes: lead searches (decision 041), the CRM, imports, write-backs, schedules
 * and subdomains (decision 042).
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { AppDeps } from '../../deps.js';
import { leadSearchRoutes } from './lead-searches.js';
import { crmRoutes } from './crm.js';
import { scheduleRoutes } from './schedules.js';
import { subdomainRoutes } from './subdomains.js';

export const sourcingRoutes =
  (deps: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    await app.register(leadSearchRoutes(deps));
    await app.register(crmRoutes(deps));
    await app.register(scheduleRoutes(deps));
    await app.register(subdomainRoutes(deps));
  };

/**
 * The affiliate program (decision 043; interface spec: Affiliate program): enrolment, codes, the
 * public click link, daily stats, the feed, the ledger, upcoming maturities and the performance
 * window. Every route but the click link acts on the caller's workspace's own affiliate
 * (`/affiliate/...`), so no path carries another tenant's id. Payouts are in ./payouts.ts.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  AffiliateCodeSchema,
  AffiliateSchema,
  ClickParamsSchema,
  ClickQuerySchema,
  CreateCodeRequestSchema,
  DailyStatSchema,
  EnrollRequestSchema,
  FeedItemSchema,
  LedgerEntrySchema,
  MaturitySchema,
  PageQuerySchema,
  PerformanceQuerySchema,
  PerformanceSchema,
  StatsQuerySchema,
  commissionMonths,
  commissionPercent,
} from '../../../domain/affiliates/affiliates.js';
import { DetailBodySchema, ValidationBodySchema } from '../../../domain/shared/common.js';
import { ApiError } from '../../../domain/shared/errors.js';
import {
  affiliateDailyStats,
  affiliateFeed,
  affiliateLedger,
  affiliateMaturities,
  affiliateView,
  clickThrough,
  createVanityCode,
  enrol,
  listCodes,
  maxVanityCodes,
  requireAffiliate,
} from '../../../services/affiliates/affiliates.js';
import { affiliatePerformance } from '../../../services/affiliates/performance.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { RateLimiter } from '../../plugins/rate-limit.js';

const tags = ['affiliates'];
const notEnrolled = DetailBodySchema.describe('The workspace is not enrolled in the affiliate program');
/** The click id a signup names (the landing page passes it on to sign-up), for the cookie window's days. */
export const clickCookie = 'aff_click';

export const affiliateRoutes =
  (deps: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const { sql } = deps;
    const settings = deps.integrations.affiliates;
    const clickLimiter = new RateLimiter({ limit: settings.clickRatePerMinute, windowSeconds: 60 });

    app.post(
      '/affiliate/',
      {
        // Enrolling accepts the program's terms for the whole workspace, as applyDesignPartner does.
        config: { role: 'admin' },
        schema: {
          operationId: 'enrollAffiliate',
          tags,
          summary: 'Enrol the workspace in the affiliate program; it gets a generated code at once',
          description: `Terms: ${commissionPercent}% of each paid invoice of a referred workspace for ${commissionMonths} months after its first payment, held for the holding period before it is available.`,
          body: EnrollRequestSchema,
          response: { 201: AffiliateSchema, 409: DetailBodySchema.describe('The workspace is enrolled already') },
        },
      },
      async (request, reply) =>
        reply.code(201).send(await enrol(sql, settings, principalOf(request).workspaceId, request.body)),
    );

    app.get(
      '/affiliate/',
      {
        schema: {
          operationId: 'readAffiliate',
          tags,
          summary:
            "The workspace's affiliate: its codes, balances (available and held, USD cents) and the program's terms",
          response: { 200: AffiliateSchema, 404: notEnrolled },
        },
      },
      async (request) => affiliateView(sql, settings, await requireAffiliate(sql, principalOf(request).workspaceId)),
    );

    app.get(
      '/affiliate/codes/',
      {
        schema: {
          operationId: 'listAffiliateCodes',
          tags,
          summary: 'The generated code and the vanity codes, oldest first',
          response: { 200: z.object({ codes: z.array(AffiliateCodeSchema) }), 404: notEnrolled },
        },
      },
      async (request) => ({ codes: await listCodes(sql, principalOf(request).workspaceId) }),
    );

    app.post(
      '/affiliate/codes/',
      {
        schema: {
          operationId: 'createAffiliateCode',
          tags,
          summary: `Add a vanity code (at most ${maxVanityCodes}); codes are unique across the service whatever their case`,
          body: CreateCodeRequestSchema,
          response: {
            201: AffiliateCodeSchema,
            404: notEnrolled,
            409: DetailBodySchema.describe(
              'The code is taken (in any case), or the affiliate has its most vanity codes',
            ),
          },
        },
      },
      async (request, reply) =>
        reply.code(201).send(await createVanityCode(sql, principalOf(request).workspaceId, request.body.code)),
    );

    app.get(
      '/affiliate/links/:code/',
      {
        config: { access: 'public' },
        schema: {
          operationId: 'followAffiliateLink',
          tags,
          summary: 'The public affiliate link: records the click and redirects to the landing page',
          description:
            `No credential. A visitor's clicks count once per affiliate and day; known bots are redirected without counting. ` +
            `The redirect carries the click id (query \`${clickCookie}\` and a cookie of that name for the cookie window's days); ` +
            'a workspace created with it within the window is attributed to the affiliate. Rate limited per address.',
          params: ClickParamsSchema,
          querystring: ClickQuerySchema,
          response: {
            302: z.null().describe('To the landing page (AFFILIATE_LANDING_URL)'),
            404: DetailBodySchema.describe('No affiliate has this code'),
            422: ValidationBodySchema.describe('The code or visitor id is not acceptable'),
            429: DetailBodySchema.describe('Too many clicks from this address; see Retry-After'),
          },
        },
      },
      async (request, reply) => {
        const taken = clickLimiter.take(`click:${request.ip}`);
        if (!taken.allowed)
          throw new ApiError('rate_limited', 'Too many clicks from this address.', {
            'retry-after': String(taken.retryAfterSeconds),
          });
        const { clickId } = await clickThrough(sql, request.params.code, {
          id: request.query.visitor,
          ip: request.ip,
          userAgent: request.headers['user-agent'],
        });
        const target = new URL(settings.landingUrl, 'http://landing.invalid');
        if (clickId) {
          target.searchParams.set(clickCookie, clickId);
          reply.header(
            'set-cookie',
            `${clickCookie}=${clickId}; Max-Age=${Math.round(settings.cookieWindowDays * 86_400)}; Path=/; SameSite=Lax`,
          );
        }
        const location =
          target.origin === 'http://landing.invalid' ? `${target.pathname}${target.search}` : target.toString();
        return reply.redirect(location, 302);
      },
    );

    app.get(
      '/affiliate/stats/daily/',
      {
        schema: {
          operationId: 'listAffiliateDailyStats',
          tags,
          summary:
            "Clicks, signups, conversions and commission earned per day of the affiliate's time zone, oldest first; quiet days are zeros",
          querystring: StatsQuerySchema,
          response: { 200: z.object({ days: z.array(DailyStatSchema) }), 404: notEnrolled },
        },
      },
      async (request) => ({
        days: await affiliateDailyStats(sql, principalOf(request).workspaceId, request.query.days, new Date()),
      }),
    );

    app.get(
      '/affiliate/feed/',
      {
        schema: {
          operationId: 'listAffiliateFeed',
          tags,
          summary: 'Signups, conversions and money movements, newest first',
          description:
            "Kinds: `signup`, `conversion` (no amount), `commission`, `clawback` (a refund or dispute clawback, negative; a won dispute's reversal, positive), " +
            '`payout` (negative; money back from a returned or failed payout, positive) and `forfeiture`.',
          querystring: PageQuerySchema,
          response: {
            200: z
              .object({ items: z.array(FeedItemSchema), next_offset: z.int().nullable() })
              .meta({ id: 'AffiliateFeedPage' }),
            404: notEnrolled,
          },
        },
      },
      async (request) =>
        affiliateFeed(sql, principalOf(request).workspaceId, request.query.limit, request.query.offset),
    );

    app.get(
      '/affiliate/ledger/',
      {
        schema: {
          operationId: 'listAffiliateLedger',
          tags,
          summary: 'Every money movement in signed USD cents, newest first; the rows sum to available plus held',
          querystring: PageQuerySchema,
          response: {
            200: z
              .object({ entries: z.array(LedgerEntrySchema), next_offset: z.int().nullable() })
              .meta({ id: 'AffiliateLedgerPage' }),
            404: notEnrolled,
          },
        },
      },
      async (request) =>
        affiliateLedger(sql, principalOf(request).workspaceId, request.query.limit, request.query.offset),
    );

    app.get(
      '/affiliate/maturities/',
      {
        schema: {
          operationId: 'listAffiliateMaturities',
          tags,
          summary: 'Held money by the day it becomes available, soonest first, with the running available total',
          response: { 200: z.object({ maturities: z.array(MaturitySchema) }), 404: notEnrolled },
        },
      },
      async (request) => affiliateMaturities(sql, principalOf(request).workspaceId),
    );

    app.get(
      '/affiliate/performance/',
      {
        schema: {
          operationId: 'readAffiliatePerformance',
          tags,
          summary:
            'The performance window: the last N days against the N days before, lifetime sums and the next payout',
          description:
            'Each trend object carries `value` (this window), `previous` (the window before), `change` (value − previous) and `change_ratio` (change ÷ previous, null when previous is 0). ' +
            'Days are the affiliate’s time zone’s. The next payout’s fields come from the same gate function the payout cycle applies.',
          querystring: PerformanceQuerySchema,
          response: { 200: PerformanceSchema, 404: notEnrolled },
        },
      },
      async (request) => affiliatePerformance(deps, principalOf(request).workspaceId, request.query.days, new Date()),
    );
  };

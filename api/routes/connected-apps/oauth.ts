/**
 * The OAuth 2.1 endpoints of connected AI apps (decision 040): protected resource metadata (RFC
 * 9728), authorization server metadata (RFC 8414), registration (RFC 7591), the authorization
 * endpoint, the token endpoint, revocation (RFC 7009), and the consent page (server-rendered HTML
 * that drives the JSON consent routes of connected-apps.ts).
 *
 * These speak OAuth, not this API: form-encoded bodies, RFC 6749 error bodies (`error`,
 * `error_description`) and browser redirects. They are public (the client has no credential of
 * ours yet; the code, the PKCE verifier or the refresh token is the credential) and are left out of
 * the OpenAPI document: a client finds them from the metadata, as the MCP authorization spec says.
 *
 * The metadata, registration and token endpoints allow any origin (CORS, plugins/cross-origin.ts),
 * so an MCP client that is a web page can connect. The authorization endpoint and the consent page
 * are navigated to, never fetched, and stay same-origin, as does revocation.
 */
import type { FastifyPluginAsync } from 'fastify';
import {
  authorizationServerMetadata,
  consentApp,
  exchangeToken,
  OAuthError,
  protectedResourceMetadata,
  registerClient,
  revokeToken,
  startAuthorization,
  type OAuthDeps,
} from '../../../services/connected-apps/authorization.js';
import { ApiError } from '../../../domain/shared/errors.js';
import type { AppDeps } from '../../deps.js';
import { consentPage } from '../../pages/consent-page.js';
import { endpointsOf, sendOAuthError, singleValues } from '../../oauth-http.js';
import { RateLimiter } from '../../plugins/rate-limit.js';

const hidden = { hide: true } as const;
const publicRoute = { access: 'public' } as const;
/** Public and callable from a web page of any origin. */
const crossOriginRoute = { access: 'public', crossOrigin: true } as const;

export const oauthRoutes =
  ({ sql, integrations, rateLimit }: AppDeps): FastifyPluginAsync =>
  async (app) => {
    // Read at each use, so a test (or a reload) that replaces the settings is heard.
    const deps: OAuthDeps = {
      sql,
      get known() {
        return integrations.connectedApps.known;
      },
      get clientMetadata() {
        return integrations.connectedApps.clientMetadata;
      },
    };
    app.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string', bodyLimit: 64 * 1024 },
      (_request, body, done) => {
        done(null, Object.fromEntries(new URLSearchParams(String(body))));
      },
    );

    for (const path of ['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource']) {
      app.get(path, { schema: hidden, config: crossOriginRoute }, async (request) =>
        protectedResourceMetadata(endpointsOf(integrations.publicBaseUrl, request)),
      );
    }
    for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
      app.get(path, { schema: hidden, config: crossOriginRoute }, async (request) =>
        authorizationServerMetadata(endpointsOf(integrations.publicBaseUrl, request)),
      );
    }

    // Registration and the token endpoint take no credential of ours: limited per client address instead.
    const limiter = new RateLimiter(rateLimit);
    app.addHook('onRequest', async (request, reply) => {
      if (request.method !== 'POST' || !request.routeOptions.url?.startsWith('/oauth/')) return;
      const limited = limiter.take(`oauth:${request.ip}`);
      if (!limited.allowed) {
        return reply
          .code(429)
          .header('retry-after', String(limited.retryAfterSeconds))
          .send({
            error: 'slow_down',
            error_description: `Too many requests; retry in ${limited.retryAfterSeconds} s.`,
          });
      }
    });

    app.post('/oauth/register', { schema: hidden, config: crossOriginRoute }, async (request, reply) => {
      try {
        return reply
          .code(201)
          .header('cache-control', 'no-store')
          .send(await registerClient(deps, request.body));
      } catch (error) {
        return sendOAuthError(reply, error);
      }
    });

    app.get('/oauth/authorize', { schema: hidden, config: publicRoute }, async (request, reply) => {
      const e = endpointsOf(integrations.publicBaseUrl, request);
      try {
        const outcome = await startAuthorization(deps, singleValues(request.query), e);
        return reply.redirect(
          'redirect' in outcome ? outcome.redirect : `${e.base}/oauth/consent/${outcome.consentId}`,
          302,
        );
      } catch (error) {
        if (!(error instanceof OAuthError)) throw error;
        // No trusted redirect: the person reads the refusal here.
        return reply
          .code(error.status === 401 ? 400 : error.status)
          .type('text/html; charset=utf-8')
          .send(consentPage({ kind: 'refused', message: `${error.error}: ${error.description}` }));
      }
    });

    app.post('/oauth/token', { schema: hidden, config: crossOriginRoute }, async (request, reply) => {
      reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
      try {
        return await exchangeToken(deps, singleValues(request.body), endpointsOf(integrations.publicBaseUrl, request));
      } catch (error) {
        return sendOAuthError(reply, error);
      }
    });

    app.post('/oauth/revoke', { schema: hidden, config: publicRoute }, async (request, reply) => {
      try {
        await revokeToken(deps, singleValues(request.body));
        return reply.code(200).send({});
      } catch (error) {
        return sendOAuthError(reply, error);
      }
    });

    /** The consent page: the app as it asks (before sign-in); the page reads the person's workspaces through the JSON routes. */
    app.get<{ Params: { request_id: string } }>(
      '/oauth/consent/:request_id',
      { schema: hidden, config: publicRoute },
      async (request, reply) => {
        reply.type('text/html; charset=utf-8').header('cache-control', 'no-store').header('x-frame-options', 'DENY');
        reply.header(
          'content-security-policy',
          "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'",
        );
        try {
          const appInfo = await consentApp(sql, request.params.request_id);
          return consentPage({ kind: 'ask', requestId: request.params.request_id, app: appInfo });
        } catch (error) {
          if (!(error instanceof ApiError) || error.status >= 500) throw error;
          return reply.code(error.status).send(consentPage({ kind: 'refused', message: error.detail }));
        }
      },
    );
  };

/** Builds the Fastify app from its dependencies. Never listens: the caller (start, tests) does. */
import Fastify, { type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { randomBytes, randomUUID } from 'node:crypto';
import { operationDoor } from './operation-door.js';
import type { AppDeps } from './deps.js';
import { registerAuth } from './plugins/auth.js';
import { answerClientError, registerErrorHandling } from './plugins/errors.js';
import { registerOpenApi } from './plugins/openapi.js';
import { registerRouting } from './plugins/routing.js';
import { registerCrossOrigin } from './plugins/cross-origin.js';
import { RateLimiter } from './plugins/rate-limit.js';
import { TableEventHub } from '../services/tables/events.js';
import { agentSendingRoutes } from './routes/pnet/agent-sending.js';
import { agentToolRoutes } from './routes/agents/agent-tools.js';
import { apiKeyRoutes } from './routes/platform/api-keys.js';
import { healthRoutes } from './routes/platform/health.js';
import { pnetAgentRoutes } from './routes/pnet/agent.js';
import { pnetHoldRoutes } from './routes/pnet/holds.js';
import { pnetStepRoutes } from './routes/pnet/steps.js';
import { outboundAgentRoutes } from './routes/agents/outbound-agents.js';
import { trainingSessionRoutes } from './routes/agents/training-sessions.js';
import { savedAgentRoutes } from './routes/agents/saved-agents.js';
import { senderProfileRoutes } from './routes/pnet/sender-profiles.js';
import { emailTemplateRoutes } from './routes/inbox/email-templates.js';
import { sequenceRoutes } from './routes/sequences/sequences.js';
import { tableColumnRoutes } from './routes/tables/columns.js';
import { columnRunRoutes, enrichmentProviderRoutes } from './routes/tables/enrichments.js';
import { tableEventRoutes } from './routes/tables/events.js';
import { tableRowRoutes } from './routes/tables/rows.js';
import { tableViewRoutes } from './routes/tables/views.js';
import { tableRoutes } from './routes/tables/tables.js';
import { workspaceRoutes } from './routes/platform/workspace.js';
import { signUpRoutes } from './routes/platform/sign-up.js';
import { invitationRoutes } from './routes/platform/invitations.js';
import { doNotContactRoutes } from './routes/inbox/do-not-contact.js';
import { inboundEmailRoutes } from './routes/inbox/inbound-email.js';
import { inboxRoutes } from './routes/inbox/inbox.js';
import { chatAttachmentRoutes } from './routes/assistant/attachments.js';
import { assistantCardRoutes } from './routes/assistant/cards.js';
import { assistantConversationRoutes } from './routes/assistant/conversations.js';
import { businessDocumentRoutes } from './routes/documents/documents.js';
import { AnswerStreamHub } from '../services/assistant/answer-stream.js';
import { cloudDriveRoutes } from './routes/cloud-drive/cloud-drive.js';
import { sourcingRoutes } from './routes/sourcing/index.js';
import { onboardingRoutes } from './routes/onboarding/onboarding.js';
import { notificationRoutes } from './routes/notifications/notifications.js';
import { webhookEndpointRoutes } from './routes/notifications/webhooks.js';
import { affiliatePayoutRoutes } from './routes/affiliates/payouts.js';
import { affiliateRoutes } from './routes/affiliates/affiliates.js';
import { teamChatRoutes } from './routes/notifications/chatapp.js';
import { billingRoutes } from './routes/billing/billing.js';
import { billingProgramRoutes } from './routes/billing/programs.js';
import { billingWebhookRoutes } from './routes/billing/webhooks.js';
import { connectedAppRoutes } from './routes/connected-apps/connected-apps.js';
import { mcpRoutes } from './routes/connected-apps/mcp.js';
import { oauthRoutes } from './routes/connected-apps/oauth.js';

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    ...(typeof deps.logger === 'object' ? { loggerInstance: deps.logger } : { logger: deps.logger ?? false }),
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && /^[\w.-]{1,128}$/.test(given) ? given : randomUUID();
    },
    requestIdHeader: false,
    bodyLimit: 10 * 1024 * 1024,
    // A path parameter is judged by its route's schema (404 or 422), not cut off by the router
    // (414) when its percent-encoding runs past Fastify's default 100 characters.
    routerOptions: { maxParamLength: 2048 },
    // Repeated query parameters at their documented most (200 CSV `map` entries, about 10 KiB)
    // plus ordinary headers must reach the schemas (422 past a bound), not Node's 16 KiB header
    // limit (an undocumented 431).
    http: { maxHeaderSize: 64 * 1024 },
    return503OnClosing: true,
    clientErrorHandler: answerClientError,
    // A `__proto__` or `constructor` key is dropped rather than the whole body refused: it is
    // never a field of ours, and clients that echo arbitrary objects should not be punished.
    onProtoPoisoning: 'remove',
    onConstructorPoisoning: 'remove',
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });

  registerErrorHandling(app);
  registerRouting(app);
  // Before any route, so the routes that opt in get their preflight.
  registerCrossOrigin(app);
  await registerOpenApi(app);
  // The assistant's tool cards call this app as a member; the secret that says so never leaves the process.
  const actingSecret = randomBytes(32).toString('base64url');
  registerAuth(app, {
    sql: deps.sql,
    verifyToken: deps.verifyToken,
    rateLimiter: new RateLimiter(deps.rateLimit),
    actingSecret,
  });
  deps.integrations.operations = operationDoor(app, actingSecret);

  await app.register(healthRoutes(deps));
  await app.register(apiKeyRoutes(deps));
  await app.register(workspaceRoutes(deps));
  await app.register(signUpRoutes(deps));
  await app.register(invitationRoutes(deps));
  await app.register(senderProfileRoutes(deps));
  await app.register(pnetStepRoutes(deps));
  await app.register(pnetHoldRoutes(deps));
  await app.register(pnetAgentRoutes(deps));
  await app.register(agentSendingRoutes(deps));
  await app.register(agentToolRoutes(deps));
  await app.register(tableRoutes(deps));
  await app.register(tableColumnRoutes(deps));
  await app.register(tableRowRoutes(deps));
  await app.register(tableViewRoutes(deps));
  await app.register(enrichmentProviderRoutes(deps));
  await app.register(columnRunRoutes(deps));
  await app.register(outboundAgentRoutes(deps));
  await app.register(trainingSessionRoutes(deps));
  await app.register(emailTemplateRoutes(deps));
  await app.register(sequenceRoutes(deps));
  await app.register(savedAgentRoutes(deps));
  await app.register(doNotContactRoutes(deps));
  await app.register(inboxRoutes(deps));
  await app.register(inboundEmailRoutes(deps));
  await app.register(assistantCardRoutes(deps));
  await app.register(assistantConversationRoutes(deps, new AnswerStreamHub(deps.sql)));
  await app.register(chatAttachmentRoutes(deps));
  await app.register(businessDocumentRoutes(deps));
  await app.register(cloudDriveRoutes(deps));
  await app.register(sourcingRoutes(deps));
  await app.register(onboardingRoutes(deps));
  await app.register(notificationRoutes(deps));
  await app.register(webhookEndpointRoutes(deps));
  await app.register(affiliateRoutes(deps));
  await app.register(affiliatePayoutRoutes(deps));
  await app.register(teamChatRoutes(deps));
  await app.register(billingRoutes(deps));
  await app.register(billingProgramRoutes(deps));
  await app.register(billingWebhookRoutes(deps));
  await app.register(connectedAppRoutes(deps));
  await app.register(oauthRoutes(deps));
  await app.register(mcpRoutes(deps));
  // The grid's change feed: one LISTEN connection and its streams per process (tests read its counts).
  const tableEvents = new TableEventHub(deps.sql, app.log);
  app.decorate('tableEvents', tableEvents);
  await app.register(tableEventRoutes(deps, tableEvents));
  return app;
}

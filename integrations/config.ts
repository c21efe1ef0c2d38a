/**
 * The service's configuration, and the one place that reads `process.env` (decision 032: eslint
 * refuses `process.env` in every other file outside test/, bench/ and sim/). Each reader takes
 * the environment as a parameter, so tests pass their own, and defaults to `process.env` as it is
 * at the call, so a script or test that sets a variable before building the stack is heard.
 *
 * - `readServiceConfig`: where the service runs (PORT, DATABASE_URL, TEMPORAL_*, ...).
 * - `readAuthSettings`: where bearer tokens are verified from (AUTH_*).
 * - `readToolSettings`: where the Temporal binaries are found (TOOLS_DIR, TEMPORAL_CLI, ...).
 * - `readIntegrationsConfig` and `createIntegrations`: the outside services (SMTP, the chat model,
 *   the enrichment providers, the agent tools, DNS, IMAP), built once. The bootstrap
 *   (worker/stack.ts) builds one set and hands it to both the worker and the API.
 * - `readFuzzSettings` and `childEnvironment`: the fuzzing script, and what child processes inherit.
 *
 * Variable names, defaults and error messages are the ones the service always had.
 */
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { agentSuppliersFrom, type AgentSuppliers } from './agent-tools/index.js';
import type { OperationDoor } from '../domain/assistant/tool-cards.js';
import { defaultAdminRoles, defaultClaimNames, type ClaimNames } from '../domain/platform/identity.js';
import { endpointCaller, type EndpointCaller } from './web/web-endpoint.js';
import { chatModelConfigFrom, chatModelFrom, type ChatModel, type ChatModelConfig } from './chat-model.js';
import {
  createEnrichmentProviders,
  type EnrichmentEnvironment,
  type EnrichmentProviders,
} from './enrichment-providers/index.js';
import { mailerFrom, type Mailer } from './mailer.js';
import { createTeamChatClient, type TeamChatClient, type TeamChatConfig } from './team-chat/client.js';
import { webhookSender, type WebhookSender } from './webhooks/sender.js';
import { defaultChatAttachmentLimits, type ChatAttachmentLimits } from '../domain/assistant/attachments.js';
import { defaultBusinessDocumentLimits, type BusinessDocumentLimits } from '../domain/documents/documents.js';
import type { EnrichmentProvider } from '../domain/tables/enrichments.js';
import { webPageReader } from './web/web-page.js';
import { createCloudDriveClient, type CloudDriveClient, type CloudDriveConfig } from './cloud-drive/drive-client.js';
import { parseSealingKey } from './secrets/sealed.js';
import { clientMetadataReader, type ClientMetadataReader } from './connected-apps/client-metadata.js';
import { parseKnownApps, type KnownApps } from '../domain/connected-apps/connected-apps.js';
import { sourcingConfigFrom, createSourcing, type Sourcing, type SourcingConfig } from './sourcing.js';
import { createStripeProvider, type StripeConfig } from './payments/stripe.js';
import type { PaymentProvider } from './payments/provider.js';
import {
  affiliatePayoutsConfigFrom,
  createAffiliatePayouts,
  type AffiliatePayouts,
  type AffiliatePayoutsConfig,
} from './payouts/settings.js';

/** An environment: `process.env`, or a test's own. */
export type Environment = Readonly<Record<string, string | undefined>>;

const projectRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

// ---------------------------------------------------------------------------------------------
// The service: where it listens, its database and Temporal, its role. Every setting has an
// embedded default.

export interface ServiceConfig {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  temporalAddress: string | undefined;
  temporalNamespace: string;
  /**
   * What the embedded Temporal stores its state in when TEMPORAL_ADDRESS is unset: the CLI's dev
   * server on SQLite (the default), or the Temporal server built from source on the stack's Postgres.
   */
  temporalPersistence: 'sqlite' | 'postgres';
  taskQueue: string;
  rateLimitPerMinute: number;
  role: 'all' | 'api' | 'worker';
  logLevel: string;
  /** `ip:port` where the worker serves the Temporal SDK's own metrics (Prometheus text); unset, none. */
  workerMetricsAddress: string | undefined;
  /** WORKFLOW_BUNDLE: the worker's prebuilt workflow bundle (`npm run build`); unset, built from the source at start. */
  workflowBundle: string | undefined;
}

function intFrom(env: Environment, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a whole number, not "${raw}".`);
  return value;
}

function metricsAddress(raw: string | undefined): string | undefined {
  if (raw === undefined || raw === '') return undefined;
  // The SDK binds a socket address, not a name: an IPv4 address or a bracketed IPv6 one.
  const m = /^(\d{1,3}(?:\.\d{1,3}){3}|\[[\da-fA-F:.]+\]):(\d{1,5})$/.exec(raw);
  const port = Number(m?.[2]);
  if (!m || port < 1 || port > 65535)
    throw new Error(`TEMPORAL_WORKER_METRICS must be ip:port (127.0.0.1:9464), not "${raw}".`);
  return raw;
}

export function readServiceConfig(env: Environment = process.env): ServiceConfig {
  const role = env.SERVICE_ROLE ?? 'all';
  if (role !== 'all' && role !== 'api' && role !== 'worker')
    throw new Error(`SERVICE_ROLE must be all, api or worker, not "${role}".`);
  const temporalPersistence = env.TEMPORAL_PERSISTENCE || 'sqlite';
  if (temporalPersistence !== 'sqlite' && temporalPersistence !== 'postgres') {
    throw new Error(`TEMPORAL_PERSISTENCE must be sqlite or postgres, not "${temporalPersistence}".`);
  }
  return {
    port: intFrom(env, 'PORT', 3000),
    host: env.HOST ?? '127.0.0.1',
    dataDir: resolve(projectRoot, env.DATA_DIR ?? '.data'),
    databaseUrl: env.DATABASE_URL || undefined,
    temporalAddress: env.TEMPORAL_ADDRESS || undefined,
    temporalNamespace: env.TEMPORAL_NAMESPACE ?? 'default',
    temporalPersistence,
    taskQueue: env.TEMPORAL_TASK_QUEUE ?? 'outreach',
    rateLimitPerMinute: intFrom(env, 'RATE_LIMIT_PER_MINUTE', 1200),
    role,
    logLevel: env.LOG_LEVEL ?? 'info',
    workerMetricsAddress: metricsAddress(env.TEMPORAL_WORKER_METRICS),
    workflowBundle: env.WORKFLOW_BUNDLE ? resolve(env.WORKFLOW_BUNDLE) : undefined,
  };
}

// ---------------------------------------------------------------------------------------------
// Bearer tokens: AUTH_JWKS_URL (a real identity provider), else AUTH_JWT_SECRET, else the
// development secret kept in the database (worker/auth-config.ts). Empty means unset.

export interface AuthSettings {
  jwksUrl?: string | undefined;
  jwtSecret?: string | undefined;
  issuer?: string | undefined;
  audience?: string | undefined;
  /** AUTH_CLAIM_*: where the provider puts each fact (domain/platform/identity.ts has the defaults). */
  claims?: ClaimNames;
  /** AUTH_ADMIN_ROLES, comma-separated: organisation roles that join as admin. */
  adminRoles?: string[];
  /** AUTH_PROVISION_ON_FIRST_USE=true: an unknown organisation's first token creates its workspace. */
  provisionOnFirstUse?: boolean;
}

export function readAuthSettings(env: Environment = process.env): AuthSettings {
  const claim = (name: string, fallback: string) => env[`AUTH_CLAIM_${name}`]?.trim() || fallback;
  return {
    jwksUrl: env.AUTH_JWKS_URL || undefined,
    jwtSecret: env.AUTH_JWT_SECRET || undefined,
    issuer: env.AUTH_JWT_ISSUER || undefined,
    audience: env.AUTH_JWT_AUDIENCE || undefined,
    claims: {
      orgId: claim('ORG_ID', defaultClaimNames.orgId),
      orgRole: claim('ORG_ROLE', defaultClaimNames.orgRole),
      orgName: claim('ORG_NAME', defaultClaimNames.orgName),
      email: claim('EMAIL', defaultClaimNames.email),
      emailVerified: claim('EMAIL_VERIFIED', defaultClaimNames.emailVerified),
      name: claim('NAME', defaultClaimNames.name),
    },
    adminRoles: env.AUTH_ADMIN_ROLES?.trim()
      ? env.AUTH_ADMIN_ROLES.split(',')
          .map((r) => r.trim())
          .filter(Boolean)
      : defaultAdminRoles,
    provisionOnFirstUse: env.AUTH_PROVISION_ON_FIRST_USE === 'true',
  };
}

// ---------------------------------------------------------------------------------------------
// The Temporal binaries (worker/tools.ts): an explicit variable, else PATH, else `.tools/`.

export type ToolVariable = 'TEMPORAL_CLI' | 'TEMPORAL_TEST_SERVER' | 'STRIPE_MOCK';

export interface ToolSettings {
  /** TOOLS_DIR, resolved; `.tools/` of the project when unset. */
  toolsDir: string;
  /** The folders of PATH, in order. */
  searchPath: string;
  /** A binary's explicit path by its variable; unset or empty, none. */
  binaries: Record<ToolVariable, string | undefined>;
}

export function readToolSettings(env: Environment = process.env): ToolSettings {
  return {
    toolsDir: env.TOOLS_DIR ? resolve(env.TOOLS_DIR) : resolve(projectRoot, '.tools'),
    searchPath: env.PATH ?? '',
    binaries: {
      TEMPORAL_CLI: env.TEMPORAL_CLI || undefined,
      TEMPORAL_TEST_SERVER: env.TEMPORAL_TEST_SERVER || undefined,
      STRIPE_MOCK: env.STRIPE_MOCK || undefined,
    },
  };
}

// ---------------------------------------------------------------------------------------------
// `npm run fuzz:api` (sim/fuzz-api.ts).

export interface FuzzSettings {
  /** FUZZ_BASE_URL and FUZZ_API_KEY: a running service to fuzz instead of a fresh stack. */
  baseUrl: string | undefined;
  apiKey: string | undefined;
  /** FUZZ_EXTENSION_TOKEN: with FUZZ_BASE_URL, a connection token (of another workspace) for the extension's routes. */
  extensionToken: string | undefined;
  /** FUZZ_CLAIMED_STEP: with FUZZ_EXTENSION_TOKEN, a claimed step of its account for the step routes. */
  claimedStepId: string | undefined;
  /** FUZZ_MAX_EXAMPLES, 100 when unset or empty. */
  maxExamples: string;
  /** The fresh stack's LOG_LEVEL: `error` when unset, so only unhandled errors reach the terminal. */
  logLevel: string;
}

export function readFuzzSettings(env: Environment = process.env): FuzzSettings {
  return {
    baseUrl: env.FUZZ_BASE_URL,
    apiKey: env.FUZZ_API_KEY,
    extensionToken: env.FUZZ_EXTENSION_TOKEN || undefined,
    claimedStepId: env.FUZZ_CLAIMED_STEP || undefined,
    maxExamples: env.FUZZ_MAX_EXAMPLES || '100',
    logLevel: env.LOG_LEVEL ?? 'error',
  };
}

/** What a child process (pip, go, Schemathesis) runs with: this process's environment plus `extra`. */
export function childEnvironment(extra: Record<string, string>): NodeJS.ProcessEnv {
  return { ...process.env, ...extra };
}

// ---------------------------------------------------------------------------------------------
// The outside services.

export interface IntegrationsConfig {
  /** SMTP_URL (unset: no SMTP, sequence emails wait and say so) and SMTP_FROM (sequences@localhost). */
  smtp: { url: string; from: string } | null;
  /** PUBLIC_BASE_URL: where the open-tracking pixel is served; unset, emails go without one. */
  publicBaseUrl: string | undefined;
  /** INVITATION_ACCEPT_URL: the app page an invitation email links to (`?token=` added); unset, the email carries the token alone. */
  invitationAcceptUrl: string | undefined;
  /** OPENAI_API_KEY, OPENAI_MODEL and OPENAI_BASE_URL; null when a key or a model is missing. */
  chatModel: ChatModelConfig | null;
  /** DNS_SERVERS (comma-separated) for the MX lookup; the system's resolvers when unset. */
  dnsServers: string[] | undefined;
  /** WEB_READER_ALLOW_PRIVATE_NETWORKS=true: pages on private and loopback addresses may be read (local use). */
  webReaderAllowPrivateNetworks: boolean;
  /** MAILBOX_ALLOW_PRIVATE_NETWORKS=true: IMAP mailboxes may be on private networks (local use). */
  mailboxAllowPrivateNetworks: boolean;
  /** The agent tools' suppliers: SEARCH_API_URL, WORK_EMAIL_FINDER_URL, PEOPLE_FINDER_URL; unset, the tool is refused. */
  agentTools: { searchApiUrl: string | null; workEmailFinderUrl: string | null; peopleFinderUrl: string | null };
  /** SEQUENCE_FEED_POLL_SECONDS: how often a sequence's audience feed reads new rows (30, at least 1). */
  sequenceFeedPollSeconds: number;
  /**
   * Chat attachments: CHAT_ATTACHMENT_MAX_BYTES (the largest upload, 20 MiB), and the extraction's
   * limits CHAT_ATTACHMENT_EXTRACT_SECONDS (60), CHAT_ATTACHMENT_EXTRACT_HEAP_MB (256) and
   * CHAT_ATTACHMENT_EXTRACT_RSS_MB (768, the reader process's memory growth while it reads a file).
   */
  chatAttachments: ChatAttachmentLimits;
  /** Business-context documents: DOCUMENTS_MAX (25 per workspace), DOCUMENT_CONTEXT_CHARS (12000 per prompt), DOCUMENT_MAX_BYTES (10 MiB). */
  businessDocuments: BusinessDocumentLimits;
  /** The affiliate program: AFFILIATE_HOLDING_DAYS, AFFILIATE_COOKIE_DAYS, AFFILIATE_LANDING_URL. */
  affiliates: AffiliateSettings;
  /** The cloud drive (DRIVE_*): its settings, or the variables it still needs (its routes answer 503 naming them). */
  cloudDrive: CloudDriveConfig | { missing: string[] };
  /** SECRETS_KEY (32 bytes, base64) seals stored third-party secrets; unset, the one kept in the database. SECRETS_KEY_PREVIOUS (comma-separated) still opens. */
  secretsKeys: { current: Buffer; previous: Buffer[] } | null;
  /** Billing (STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET, STRIPE_API_BASE, BILLING_RETURN_URL): the provider's settings, or what is missing. */
  payments: (StripeConfig & { returnUrl: string }) | { missing: string[] };
  /** Where a referral link points (REFERRAL_LINK_BASE, else PUBLIC_BASE_URL + /signup); null leaves links out. */
  referralLinkBase: string | null;
  /** CONNECTED_APPS_KNOWN (`assistant_a=host,host;assistant_b=host`): where recognised AI apps serve their client metadata documents; none when unset. */
  connectedAppsKnown: KnownApps;
  /**
   * Data sourcing (decisions 041, 042): APOLLO_API_KEY / APOLLO_API_URL, LEAD_SEARCH_PRICE_PER_ROW,
   * HUBSPOT_API_URL, CT_LOG_URL.
   */
  sourcing: SourcingConfig;
  /**
   * Notifications (decision 038): WEBHOOKS_ALLOW_PRIVATE_NETWORKS=true lets webhook endpoints be
   * private addresses (local twins only); the team chat (TEAM_CHAT_*).
   */
  notifications: { webhooksAllowPrivateNetworks: boolean; teamChat: TeamChatConfig | { missing: string[] } };
  /** Affiliate payouts (PAYPAL_CLIENT_ID, PAYPAL_CLIENT_SECRET, PAYPAL_API_BASE, AFFILIATE_PAYOUT_DAY, AFFILIATE_PAYOUT_MINIMUM_CENTS, AFFILIATE_FORFEIT_DAYS; integrations/payouts/settings.ts). */
  affiliatePayouts: AffiliatePayoutsConfig;
}

/** The team chat's settings (Slack's addresses by default); without TEAM_CHAT_CLIENT_ID or a callback address, what is missing. */
function teamChatFrom(env: Environment): TeamChatConfig | { missing: string[] } {
  const clientId = env.TEAM_CHAT_CLIENT_ID?.trim();
  const publicBase = env.PUBLIC_BASE_URL?.trim().replace(/\/+$/, '');
  const redirectUrl =
    env.TEAM_CHAT_REDIRECT_URL?.trim() || (publicBase ? `${publicBase}/notifications/chatapp/callback/` : '');
  const missing = [
    ...(clientId ? [] : ['TEAM_CHAT_CLIENT_ID']),
    ...(redirectUrl ? [] : ['TEAM_CHAT_REDIRECT_URL (or PUBLIC_BASE_URL)']),
  ];
  if (!clientId || !redirectUrl) return { missing };
  return {
    clientId,
    clientSecret: env.TEAM_CHAT_CLIENT_SECRET || undefined,
    authUrl: env.TEAM_CHAT_AUTH_URL?.trim() || 'https://slack.com/oauth/v2/authorize',
    apiUrl: env.TEAM_CHAT_API_URL?.trim() || 'https://slack.com/api',
    redirectUrl,
    scopes: ['chat:write', 'channels:read', 'groups:read'],
  };
}

function paymentsFrom(env: Environment): (StripeConfig & { returnUrl: string }) | { missing: string[] } {
  const secretKey = env.STRIPE_SECRET_KEY?.trim();
  const webhookSecret = env.STRIPE_WEBHOOK_SECRET?.trim();
  const publicBase = env.PUBLIC_BASE_URL?.trim().replace(/\/+$/, '');
  const returnUrl = env.BILLING_RETURN_URL?.trim() || (publicBase ? `${publicBase}/billing/` : '');
  const missing = [
    ...(secretKey ? [] : ['STRIPE_SECRET_KEY']),
    ...(webhookSecret ? [] : ['STRIPE_WEBHOOK_SECRET']),
    ...(returnUrl ? [] : ['BILLING_RETURN_URL (or PUBLIC_BASE_URL)']),
  ];
  if (!secretKey || !webhookSecret || !returnUrl) return { missing };
  return { secretKey, webhookSecret, apiBase: env.STRIPE_API_BASE?.trim() || null, returnUrl };
}

/** The cloud drive's settings (Google's addresses by default); without DRIVE_CLIENT_ID or a callback address, what is missing. */
function cloudDriveFrom(env: Environment): CloudDriveConfig | { missing: string[] } {
  const clientId = env.DRIVE_CLIENT_ID?.trim();
  const publicBase = env.PUBLIC_BASE_URL?.trim().replace(/\/+$/, '');
  const redirectUrl = env.DRIVE_REDIRECT_URL?.trim() || (publicBase ? `${publicBase}/cloud-drive/callback/` : '');
  const missing = [
    ...(clientId ? [] : ['DRIVE_CLIENT_ID']),
    ...(redirectUrl ? [] : ['DRIVE_REDIRECT_URL (or PUBLIC_BASE_URL)']),
  ];
  if (!clientId || !redirectUrl) return { missing };
  return {
    clientId,
    clientSecret: env.DRIVE_CLIENT_SECRET || undefined,
    authUrl: env.DRIVE_AUTH_URL?.trim() || 'https://accounts.google.com/o/oauth2/v2/auth',
    tokenUrl: env.DRIVE_TOKEN_URL?.trim() || 'https://oauth2.googleapis.com/token',
    apiUrl: env.DRIVE_API_URL?.trim() || 'https://www.googleapis.com',
    redirectUrl,
    scopes: ['https://www.googleapis.com/auth/drive.readonly'],
  };
}

function secretsKeysFrom(env: Environment): { current: Buffer; previous: Buffer[] } | null {
  const previous = (env.SECRETS_KEY_PREVIOUS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((k) => parseSealingKey(k, 'SECRETS_KEY_PREVIOUS'));
  return env.SECRETS_KEY?.trim() ? { current: parseSealingKey(env.SECRETS_KEY, 'SECRETS_KEY'), previous } : null;
}

export function readIntegrationsConfig(env: Environment = process.env): IntegrationsConfig {
  const url = (name: string) => env[name]?.trim() || null;
  const servers = env.DNS_SERVERS?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return {
    smtp: env.SMTP_URL ? { url: env.SMTP_URL, from: env.SMTP_FROM ?? 'sequences@localhost' } : null,
    publicBaseUrl: env.PUBLIC_BASE_URL,
    invitationAcceptUrl: env.INVITATION_ACCEPT_URL?.trim() || undefined,
    chatModel: chatModelConfigFrom(env),
    dnsServers: servers,
    webReaderAllowPrivateNetworks: env.WEB_READER_ALLOW_PRIVATE_NETWORKS === 'true',
    mailboxAllowPrivateNetworks: env.MAILBOX_ALLOW_PRIVATE_NETWORKS === 'true',
    agentTools: {
      searchApiUrl: url('SEARCH_API_URL'),
      workEmailFinderUrl: url('WORK_EMAIL_FINDER_URL'),
      peopleFinderUrl: url('PEOPLE_FINDER_URL'),
    },
    sequenceFeedPollSeconds: Math.max(1, Number(env.SEQUENCE_FEED_POLL_SECONDS) || 30),
    chatAttachments: chatAttachmentLimitsFrom(env),
    businessDocuments: businessDocumentLimitsFrom(env),
    cloudDrive: cloudDriveFrom(env),
    secretsKeys: secretsKeysFrom(env),
    payments: paymentsFrom(env),
    connectedAppsKnown: parseKnownApps(env.CONNECTED_APPS_KNOWN),
    referralLinkBase:
      env.REFERRAL_LINK_BASE?.trim() ||
      (env.PUBLIC_BASE_URL?.trim() ? `${env.PUBLIC_BASE_URL.trim().replace(/\/+$/, '')}/signup` : null),
    sourcing: sourcingConfigFrom(env),
    notifications: {
      webhooksAllowPrivateNetworks: env.WEBHOOKS_ALLOW_PRIVATE_NETWORKS === 'true',
      teamChat: teamChatFrom(env),
    },
    affiliatePayouts: affiliatePayoutsConfigFrom(env),
    affiliates: affiliateSettingsFrom(env),
  };
}

/**
 * The affiliate program (decision 043): AFFILIATE_HOLDING_DAYS (how long a commission is held
 * before it is available; 30, fractions allowed so a bench can make it seconds), AFFILIATE_COOKIE_DAYS
 * (how long after a click a signup is attributed; 30), AFFILIATE_LANDING_URL (where the public
 * click route redirects; PUBLIC_BASE_URL, else `/`) and AFFILIATE_CLICK_RATE_PER_MINUTE (120 per address).
 */
export interface AffiliateSettings {
  holdingMs: number;
  cookieWindowDays: number;
  landingUrl: string;
  /** AFFILIATE_CLICK_RATE_PER_MINUTE: clicks one address may send to the public click route per minute (120; 0 switches the limit off, as the bench does). */
  clickRatePerMinute: number;
}

function affiliateSettingsFrom(env: Environment): AffiliateSettings {
  const days = (name: string, fallback: number) => {
    const raw = env[name]?.trim();
    if (!raw) return fallback;
    const value = Number(raw);
    if (!Number.isFinite(value) || value <= 0)
      throw new Error(`${name} must be a positive number of days, not "${raw}".`);
    return value;
  };
  return {
    holdingMs: Math.round(days('AFFILIATE_HOLDING_DAYS', 30) * 86_400_000),
    cookieWindowDays: days('AFFILIATE_COOKIE_DAYS', 30),
    landingUrl: env.AFFILIATE_LANDING_URL?.trim() || env.PUBLIC_BASE_URL?.trim() || '/',
    clickRatePerMinute: Math.max(0, intFrom(env, 'AFFILIATE_CLICK_RATE_PER_MINUTE', 120)),
  };
}

function businessDocumentLimitsFrom(env: Environment): BusinessDocumentLimits {
  const positive = (name: string, fallback: number) => {
    const value = intFrom(env, name, fallback);
    if (value < 1) throw new Error(`${name} must be at least 1, not "${env[name]}".`);
    return value;
  };
  return {
    maxDocuments: positive('DOCUMENTS_MAX', defaultBusinessDocumentLimits.maxDocuments),
    contextChars: positive('DOCUMENT_CONTEXT_CHARS', defaultBusinessDocumentLimits.contextChars),
    maxUploadBytes: positive('DOCUMENT_MAX_BYTES', defaultBusinessDocumentLimits.maxUploadBytes),
  };
}

function chatAttachmentLimitsFrom(env: Environment): ChatAttachmentLimits {
  const positive = (name: string, fallback: number) => {
    const value = intFrom(env, name, fallback);
    if (value < 1) throw new Error(`${name} must be at least 1, not "${env[name]}".`);
    return value;
  };
  return {
    maxUploadBytes: positive('CHAT_ATTACHMENT_MAX_BYTES', defaultChatAttachmentLimits.maxUploadBytes),
    extractSeconds: positive('CHAT_ATTACHMENT_EXTRACT_SECONDS', defaultChatAttachmentLimits.extractSeconds),
    extractHeapMb: positive('CHAT_ATTACHMENT_EXTRACT_HEAP_MB', defaultChatAttachmentLimits.extractHeapMb),
    extractRssGrowthMb: positive('CHAT_ATTACHMENT_EXTRACT_RSS_MB', defaultChatAttachmentLimits.extractRssGrowthMb),
  };
}

/** The outside services of one process, built once (`createIntegrations`). */
export interface Integrations {
  /** Sequence email and inbox replies; null without SMTP_URL. */
  mailer: Mailer | null;
  /** The outbound agent, training sessions and inbox suggestions; null for the local template writer. */
  chatModel: ChatModel | null;
  enrichmentProviders: EnrichmentProviders;
  agentSuppliers: AgentSuppliers;
  mailboxNetwork: { allowPrivateNetworks: boolean };
  publicBaseUrl: string | undefined;
  invitationAcceptUrl: string | undefined;
  sequenceFeedPollSeconds: number;
  /** The upload limit the API applies and the limits the worker extracts attachments within (a test may change them). */
  chatAttachments: ChatAttachmentLimits;
  /** The API's own operations, called as a member from inside this process (tool cards); set by the app once built. */
  operations: OperationDoor | null;
  /** Outside endpoints the assistant's `call_endpoint` posts to, through the page reader's address checks. */
  webEndpoint: EndpointCaller;
  /**
   * Business-context documents' limits (a test may change them), and how a company's site is read
   * from its domain: the page reader (the web page column's address checks) and where a domain's
   * pages are (https://<domain>; a test points it at a local server).
   */
  businessDocuments: BusinessDocumentLimits & {
    pageReader: EnrichmentProvider;
    siteOrigin: (domain: string) => string;
  };
  /** The cloud drive's client, or the variables it needs (a test may set a client on it). */
  cloudDrive: CloudDriveClient | { missing: string[] };
  /** The keys stored third-party secrets are sealed with; null for the one kept in the database (services/platform/sealing.ts). */
  secretsKeys: { current: Buffer; previous: Buffer[] } | null;
  /** The payment provider and where checkout returns to, or the variables billing needs (its routes answer 503 naming them; a test may set one). */
  payments: { provider: PaymentProvider; returnUrl: string } | { missing: string[] };
  referralLinkBase: string | null;
  /** Connected AI apps: the recognised apps' hosts, and the reader of client metadata documents (the page reader's address checks). */
  connectedApps: { known: KnownApps; clientMetadata: ClientMetadataReader };
  /** Lead-search providers, the CRM's address, the CT log and DNS for subdomains (a test may replace them). */
  sourcing: Sourcing;
  /** Webhook POSTs (the page reader's address checks unless WEBHOOKS_ALLOW_PRIVATE_NETWORKS) and the team chat's client or what it needs (a test may set them). */
  notifications: { webhooks: WebhookSender; teamChat: TeamChatClient | { missing: string[] } };
  /** The payout provider (PayPal) or the variables it needs, and the payout terms (a test may set them). */
  affiliatePayouts: AffiliatePayouts;
  /** The affiliate program's settings (a test may change them). */
  affiliates: AffiliateSettings;
}

/**
 * The integrations' factories (agent tools, enrichment providers) take the variables by name, the
 * way their tests build them from hand-made environments: this is the configuration in that form.
 */
function factoryEnvironment(config: IntegrationsConfig): Record<string, string | undefined> {
  return {
    SMTP_URL: config.smtp?.url,
    SMTP_FROM: config.smtp?.from,
    OPENAI_API_KEY: config.chatModel?.apiKey,
    OPENAI_MODEL: config.chatModel?.model,
    OPENAI_BASE_URL: config.chatModel?.baseUrl,
    DNS_SERVERS: config.dnsServers?.join(','),
    WEB_READER_ALLOW_PRIVATE_NETWORKS: config.webReaderAllowPrivateNetworks ? 'true' : undefined,
    SEARCH_API_URL: config.agentTools.searchApiUrl ?? undefined,
    WORK_EMAIL_FINDER_URL: config.agentTools.workEmailFinderUrl ?? undefined,
    PEOPLE_FINDER_URL: config.agentTools.peopleFinderUrl ?? undefined,
  };
}

/** Every outside service of the configuration; `enrichment` swaps the MX resolver or the page reader's limits (tests). */
export function createIntegrations(
  config: IntegrationsConfig,
  enrichment: Omit<EnrichmentEnvironment, 'env'> = {},
): Integrations {
  const env = factoryEnvironment(config);
  const chatModel = chatModelFrom(env);
  return {
    mailer: mailerFrom(env),
    chatModel,
    enrichmentProviders: createEnrichmentProviders({ ...enrichment, env }),
    agentSuppliers: agentSuppliersFrom(env, { chatModel }),
    mailboxNetwork: { allowPrivateNetworks: config.mailboxAllowPrivateNetworks },
    publicBaseUrl: config.publicBaseUrl,
    invitationAcceptUrl: config.invitationAcceptUrl,
    sequenceFeedPollSeconds: config.sequenceFeedPollSeconds,
    operations: null,
    webEndpoint: endpointCaller({ allowPrivateNetworks: config.webReaderAllowPrivateNetworks }),
    chatAttachments: { ...config.chatAttachments },
    businessDocuments: {
      ...config.businessDocuments,
      pageReader: webPageReader({ allowPrivateNetworks: config.webReaderAllowPrivateNetworks }),
      siteOrigin: (domain) => `https://${domain}`,
    },
    cloudDrive: 'missing' in config.cloudDrive ? config.cloudDrive : createCloudDriveClient(config.cloudDrive),
    secretsKeys: config.secretsKeys,
    payments:
      'missing' in config.payments
        ? config.payments
        : { provider: createStripeProvider(config.payments), returnUrl: config.payments.returnUrl },
    referralLinkBase: config.referralLinkBase,
    connectedApps: {
      known: config.connectedAppsKnown,
      clientMetadata: clientMetadataReader({ allowPrivateNetworks: config.webReaderAllowPrivateNetworks }),
    },
    sourcing: createSourcing(config.sourcing, {
      dnsServers: config.dnsServers,
      allowPrivateNetworks: config.webReaderAllowPrivateNetworks,
    }),
    notifications: {
      webhooks: webhookSender({ allowPrivateNetworks: config.notifications.webhooksAllowPrivateNetworks }),
      teamChat:
        'missing' in config.notifications.teamChat
          ? config.notifications.teamChat
          : createTeamChatClient(config.notifications.teamChat),
    },
    affiliatePayouts: createAffiliatePayouts(config.affiliatePayouts),
    affiliates: { ...config.affiliates },
  };
}

/** CHROMIUM_PATH: the headless browser the consent-page test drives (Debian's `chromium` when unset). */
export function readBrowserSettings(env: Environment = process.env): { chromiumPath: string | undefined } {
  return { chromiumPath: env.CHROMIUM_PATH || undefined };
}

/**
 * The outside services a fuzz run's stack talks to, as local twins: without them their routes
 * answer 503 (not configured) by design, and every case would be that 503. Each twin speaks its
 * service's protocol (stripe-mock is Stripe's own); the environment names them to the stack.
 */
import { serveChatModel } from './chat-model-server.js';
import { serveCrmTwin } from './crm-server.js';
import { serveCtLog } from './ct-log-server.js';
import { driveSimConfig, startDriveSim } from './drive-server.js';
import { serveLeadSearchTwin, twinPeople } from './lead-search-server.js';
import { startSmtpSink } from './smtp-sink.js';
import { startStripeMock } from './stripe-mock.js';
import { startTeamChatSim } from './team-chat-server.js';

export interface FuzzSuppliers {
  /** The settings that point the stack at the twins. */
  environment: Record<string, string>;
  close: () => Promise<void>;
}

export async function startFuzzSuppliers(): Promise<FuzzSuppliers> {
  const closers: (() => Promise<unknown>)[] = [];
  const close = async () => {
    await Promise.allSettled(closers.map((stop) => stop()));
  };
  try {
    const stripe = await startStripeMock();
    closers.push(() => stripe.stop());
    const model = await serveChatModel(() => ({ content: 'A short answer.' }));
    closers.push(() => model.close());
    const drive = await startDriveSim();
    closers.push(() => drive.close());
    const teamChat = await startTeamChatSim();
    closers.push(() => teamChat.close());
    const crm = await serveCrmTwin({ tokens: ['pat-fuzz'] });
    closers.push(() => crm.close());
    const ctLog = await serveCtLog({});
    closers.push(() => ctLog.close());
    const leads = await serveLeadSearchTwin({ apiKey: 'fuzz-key', people: twinPeople(20) });
    closers.push(() => leads.close());
    // Invitations and sequence emails go through the mailer; without one, inviting is 503 by design.
    const smtp = await startSmtpSink();
    closers.push(() => smtp.close());
    const driveConfig = driveSimConfig(drive);
    return {
      environment: {
        OPENAI_API_KEY: 'local',
        OPENAI_MODEL: 'local-model',
        OPENAI_BASE_URL: model.url,
        DRIVE_CLIENT_ID: driveConfig.clientId,
        DRIVE_CLIENT_SECRET: driveConfig.clientSecret,
        DRIVE_AUTH_URL: driveConfig.authUrl,
        DRIVE_TOKEN_URL: driveConfig.tokenUrl,
        DRIVE_API_URL: driveConfig.apiUrl,
        DRIVE_REDIRECT_URL: driveConfig.redirectUrl,
        TEAM_CHAT_CLIENT_ID: teamChat.clientId,
        TEAM_CHAT_CLIENT_SECRET: teamChat.clientSecret,
        TEAM_CHAT_AUTH_URL: teamChat.authUrl,
        TEAM_CHAT_API_URL: teamChat.apiUrl,
        TEAM_CHAT_REDIRECT_URL: 'http://localhost/notifications/chatapp/callback/',
        HUBSPOT_API_URL: crm.url,
        CT_LOG_URL: ctLog.url,
        APOLLO_API_KEY: 'fuzz-key',
        APOLLO_API_URL: leads.url,
        STRIPE_SECRET_KEY: 'sk_test_fuzz',
        STRIPE_WEBHOOK_SECRET: 'whsec_fuzz',
        STRIPE_API_BASE: stripe.apiBase,
        BILLING_RETURN_URL: 'http://localhost/billing/',
        SMTP_URL: smtp.url,
      },
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

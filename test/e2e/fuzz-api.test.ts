/** CI's short run of `npm run fuzz:api`: Schemathesis, all checks, against a freshly started stack. */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { serveChatModel, type ChatModelServer } from '../../sim/chat-model-server.js';
import { driveSimConfig, startDriveSim, type DriveSim } from '../../sim/drive-server.js';
import { startTeamChatSim, type TeamChatSim } from '../../sim/team-chat-server.js';
import { serveCrmTwin, type CrmTwin } from '../../sim/crm-server.js';
import { serveCtLog } from '../../sim/ct-log-server.js';
import { serveLeadSearchTwin, twinPeople } from '../../sim/lead-search-server.js';
import { startStripeMock, type StripeMock } from '../../sim/stripe-mock.js';
import { projectRoot } from '../../worker/tools.js';

// The assistant's and the cloud drive's routes are fuzzed with their outside services there to
// answer (local twins: a model speaking the OpenAI protocol, a Drive-shaped API); without them
// those routes answer 503 by design and every answer would be that.
let model: ChatModelServer;
let drive: DriveSim;
let teamChat: TeamChatSim;
// Data sourcing's twins: a CRM (a connection's token is checked there), a CT log, a lead-search provider.
let crm: CrmTwin;
let ctLog: Awaited<ReturnType<typeof serveCtLog>>;
let leads: Awaited<ReturnType<typeof serveLeadSearchTwin>>;
// Billing's provider: stripe-mock, so checkout and the portal are fuzzed past their 503.
let stripe: StripeMock;
beforeAll(async () => {
  stripe = await startStripeMock();
  model = await serveChatModel(() => ({ content: 'A short answer.' }));
  drive = await startDriveSim();
  teamChat = await startTeamChatSim();
  crm = await serveCrmTwin({ tokens: ['pat-fuzz'] });
  ctLog = await serveCtLog({});
  leads = await serveLeadSearchTwin({ apiKey: 'fuzz-key', people: twinPeople(20) });
});
afterAll(async () => {
  await model?.close();
  await drive?.close();
  await teamChat?.close();
  await crm?.close();
  await ctLog?.close();
  await leads?.close();
  await stripe?.stop();
});

it('passes every Schemathesis check on every operation of the OpenAPI document', async () => {
  // Two Schemathesis workers: while one waits on the API the other generates its next case.
  const child = spawn('npm', ['run', '--silent', 'fuzz:api', '--', '--workers', '2'], {
    cwd: projectRoot,
    env: {
      ...process.env,
      FUZZ_MAX_EXAMPLES: '10',
      DATABASE_URL: '',
      TEMPORAL_ADDRESS: '',
      FUZZ_BASE_URL: '',
      FUZZ_API_KEY: '',
      OPENAI_API_KEY: 'local',
      OPENAI_MODEL: 'local-model',
      OPENAI_BASE_URL: model.url,
      ...driveEnvironment(),
      // The team chat's twin (a Slack-shaped Web API), so its connect route is fuzzed past the 503.
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
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  // On failure show Schemathesis' failures section (each with its curl to reproduce), not the
  // warnings about links that come after it.
  const failures = /=+ FAILURES =+([\s\S]*?)(?:=+ (?:WARNINGS|SUMMARY) =+)/.exec(output)?.[1]?.trim();
  expect({ code, failures: code === 0 ? '' : (failures ?? output.slice(-6000)).slice(0, 20_000) }).toEqual({ code: 0, failures: '' });
  expect(output).toMatch(/Tested: \d+/);
  // What was run and how long each phase took, for the CI log.
  console.log(/=+ SUMMARY =+[\s\S]*$/.exec(output)?.[0] ?? output.slice(-3000));
}, 1_200_000);

function driveEnvironment(): Record<string, string> {
  const config = driveSimConfig(drive);
  return {
    DRIVE_CLIENT_ID: config.clientId,
    DRIVE_CLIENT_SECRET: config.clientSecret,
    DRIVE_AUTH_URL: config.authUrl,
    DRIVE_TOKEN_URL: config.tokenUrl,
    DRIVE_API_URL: config.apiUrl,
    DRIVE_REDIRECT_URL: config.redirectUrl,
  };
}
